#pragma once

// UTF-8 as RFC 3629 defines it: no overlong forms, no UTF-16 surrogates, nothing above
// U+10FFFF. Pure functions over bytes; thread-safe.

#include <cstddef>
#include <string_view>

namespace wk {

// The length (1..4) of the valid UTF-8 sequence at the start of text, or 0 if text is
// empty or does not start with one. Stores the code point in *code_point when given.
std::size_t Utf8SequenceLength(std::string_view text, char32_t* code_point = nullptr);

// True if every byte of text belongs to a valid UTF-8 sequence.
bool IsValidUtf8(std::string_view text);

}  // namespace wk
