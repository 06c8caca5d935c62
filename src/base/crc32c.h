// CRC-32C (Castagnoli), the one checksum of WasmKeep's stored formats: the segment and
// snapshot trailers (replica/format.h) and the file store's object headers
// (store/file/file_layout.h).
//
// Why CRC-32C: it is the checksum S3 itself offers (x-amz-checksum-crc32c), it catches
// every burst error up to 32 bits and every odd number of bit flips, and x86-64 computes
// it in hardware (SSE4.2 `crc32`), 8 bytes per instruction. It guards against torn or
// corrupted bodies, not against an adversary (the bucket is trusted).
//
// Crc32c uses the SSE4.2 instruction when the CPU has it (checked once, at run time) and
// otherwise a slicing-by-8 table; Crc32cPortable is always the table, so tests can compare
// the two. Both give the same value for every input.
//
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace wk {

// Extends crc (0 to start) with data; the running form:
// Crc32c(b, Crc32c(a)) == Crc32c(a + b). Crc32c("123456789") == 0xE3069283.
std::uint32_t Crc32c(std::string_view data, std::uint32_t crc = 0);
// The same without CPU-specific instructions.
std::uint32_t Crc32cPortable(std::string_view data, std::uint32_t crc = 0);
// Whether Crc32c uses the hardware instruction on this machine (for tests and benchmarks).
bool Crc32cUsesHardware();

}  // namespace wk
