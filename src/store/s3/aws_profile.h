// The AWS shared configuration files, read the way the AWS CLI and SDKs read them, so an
// s3:// bucket takes its region, endpoint and credentials from where users already keep
// them (docs/storage-backends.md, "Where the settings come from").
//
//   files      $AWS_CONFIG_FILE (default ~/.aws/config) and
//              $AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials); ~ is $HOME.
//              A missing file is no error.
//   profile    $AWS_PROFILE, else $AWS_DEFAULT_PROFILE, else "default". In the config file
//              its section is [profile NAME] ([default] for the default one); in the
//              credentials file, [NAME]. A profile named explicitly that neither file has
//              is an error (kInvalidArgument naming both files).
//   keys       region, endpoint_url (every service), the nested `s3 =` block's
//              endpoint_url (S3 only, which wins), aws_access_key_id,
//              aws_secret_access_key, aws_session_token. The credentials file wins over
//              the config file for the credential keys, as in the AWS CLI.
//   syntax     INI: `[section]`, `key = value`, full-line comments starting with # or ;,
//              an indented `key = value` under `name =` belongs to that nested block.
//   not read   role_arn / source_profile, credential_process, SSO, web identity, instance
//              roles (IMDS): the store signs with a static key (and session token) only.
//
// Threading: pure functions over the environment and file readers they are given.
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
