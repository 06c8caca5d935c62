// CRC-32C (Castagnoli), the checksum of WasmKeep's segment and snapshot formats.
//
// Why CRC-32C: it is the checksum S3 itself offers (x-amz-checksum-crc32c), it catches
// every burst error up to 32 bits and every odd number of bit flips, and a table-driven
// version is a few lines with no dependency. It guards against torn or corrupted bodies,
// not against an adversary (the bucket is trusted).
//
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace wk {

// Extends crc (0 to start) with data. Crc32c("123456789") == 0xE3069283.
std::uint32_t Crc32c(std::string_view data, std::uint32_t crc = 0);

}  // namespace wk
