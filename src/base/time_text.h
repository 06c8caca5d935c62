// Wall-clock times as people write them: RFC 3339 in UTC or with an offset
// ("2026-12-05T10:00:00Z", "2026-12-05T10:00:00.250+01:00") or Unix milliseconds
// ("1733392800000"), and back (always UTC, to the millisecond). Used by the commands and
// routes that take a point in time (docs/cli.md, `actor history`, `actor restore`).
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace wk {

// Unix milliseconds; kInvalidArgument naming the text and both accepted forms otherwise.
Result<std::int64_t> ParseTimeMs(std::string_view text);
// "YYYY-MM-DDTHH:MM:SS.mmmZ".
std::string FormatTimeMs(std::int64_t unix_ms);

}  // namespace wk
