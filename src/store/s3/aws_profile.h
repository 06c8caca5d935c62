// The AWS shared configuration files (~/.aws/config, ~/.aws/credentials, their environment
// overrides and the profile), read the way the AWS CLI reads them, for an s3:// bucket's
// region, endpoint and static credentials (docs/storage-backends.md, "Where the S3 settings
// come from"). A missing file is no error; a profile named explicitly that neither file has
// is kInvalidArgument. Threading: pure functions over the environment and file readers
// they are given. Details (keys, syntax, what is not read): docs/internals.md, "AWS profiles".
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace wk {

using AwsGetenvFn = std::function<std::optional<std::string>(const char*)>;
// Reads a whole file; nullopt when it does not exist or cannot be read.
using ReadFileFn = std::function<std::optional<std::string>(const std::string& path)>;
// The real file system.
ReadFileFn SystemReadFile();

// section -> key -> value. Nested blocks are flattened: `s3 =` then `  endpoint_url = x`
// gives key "s3.endpoint_url". Keys are lower-cased; values trimmed.
using AwsIni = std::map<std::string, std::map<std::string, std::string>>;
AwsIni ParseAwsIni(std::string_view text);

struct AwsProfile {
  std::string name;  // the profile read
  std::optional<std::string> region;
  std::optional<std::string> endpoint_url;  // the s3 block's, else the profile's
  std::optional<std::string> access_key_id, secret_access_key, session_token;
  // Where each came from, for logs: "region from /root/.aws/config [profile prod]".
  std::map<std::string, std::string> sources;
};

// The profile the environment names, from the two files (either may be absent).
Result<AwsProfile> LoadAwsProfile(const AwsGetenvFn& getenv, const ReadFileFn& read_file);

}  // namespace wk
