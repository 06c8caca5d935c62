// Hex encoding and SHA-256: the one place WasmKeep turns bytes into hex and hashes them
// (SigV4 signing, module digests, the cluster secret's request signatures, version tokens).
//
// ToHex is lowercase; FromHex is strict (an even number of lowercase or uppercase hex
// digits, nothing else) so a stored or received hex value has one spelling per meaning
// only when the caller also compares case (the formats that store hex write lowercase and
// check it). ConstantTimeEqual compares secrets and MACs without a data-dependent early
// exit, so a timing difference does not tell an attacker how many leading bytes matched.
//
// Threading: pure functions (OpenSSL's one-shot digest and HMAC calls are thread-safe).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace wk {

inline constexpr std::size_t kSha256Bytes = 32;

// Lowercase hex of bytes, two characters a byte.
std::string ToHex(std::string_view bytes);
// The bytes of hex, or nullopt unless hex is an even number of [0-9a-fA-F].
std::optional<std::string> FromHex(std::string_view hex);

// Raw 32-byte SHA-256 of data, and its lowercase hex (64 characters).
std::string Sha256(std::string_view data);
std::string Sha256Hex(std::string_view data);
// Raw 32-byte HMAC-SHA256 of data under key.
std::string HmacSha256(std::string_view key, std::string_view data);

// a == b, in time that depends on the sizes only (not on where the bytes differ).
bool ConstantTimeEqual(std::string_view a, std::string_view b);

}  // namespace wk
