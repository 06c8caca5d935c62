#include "store/s3/aws_profile.h"

#include <fstream>

namespace wk {
namespace {

// Bounds a configuration file may not pass (a file this large is not an AWS config).
constexpr std::size_t kMaxFileBytes = 1 << 20;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return out;
}

const std::string* Find(const AwsIni& ini, const std::string& section, const std::string& key) {
  auto s = ini.find(section);
  if (s == ini.end()) return nullptr;
  auto k = s->second.find(key);
  return k == s->second.end() || k->second.empty() ? nullptr : &k->second;
}

}  // namespace

ReadFileFn SystemReadFile() {
  return [](const std::string& path) -> std::optional<std::string> {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::string text(kMaxFileBytes + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxFileBytes) return std::nullopt;
    return text;
  };
}

AwsIni ParseAwsIni(std::string_view text) {
  AwsIni ini;
  std::string section;
  std::string nested;  // the open `name =` block, if any
  while (!text.empty()) {
    const std::size_t nl = text.find('\n');
    std::string_view raw = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    const bool indented = !raw.empty() && (raw.front() == ' ' || raw.front() == '\t');
    const std::string_view line = Trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = std::string(Trim(line.substr(1, line.size() - 2)));
      nested.clear();
      ini[section];
      continue;
    }
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos || section.empty()) continue;  // not a setting: ignored, as the AWS CLI does
    const std::string key = Lower(Trim(line.substr(0, eq)));
    const std::string value(Trim(line.substr(eq + 1)));
    if (!indented) nested.clear();
    if (indented && !nested.empty()) {
      ini[section][nested + "." + key] = value;
    } else if (value.empty()) {
      nested = key;  // `s3 =` opens a nested block
    } else {
      ini[section][key] = value;
    }
  }
  return ini;
}

Result<AwsProfile> LoadAwsProfile(const AwsGetenvFn& getenv, const ReadFileFn& read_file) {
  AwsProfile p;
  const auto set = [](const std::optional<std::string>& v) { return v && !v->empty(); };
  auto named = getenv("AWS_PROFILE");
  if (!set(named)) named = getenv("AWS_DEFAULT_PROFILE");
  const bool explicit_profile = set(named);
  p.name = explicit_profile ? *named : "default";

  const auto home = getenv("HOME");
  auto path_of = [&](const char* variable, const char* under_home) -> std::optional<std::string> {
    if (auto v = getenv(variable); set(v)) return *v;
    if (set(home)) return *home + "/" + under_home;
    return std::nullopt;
  };
  const auto config_path = path_of("AWS_CONFIG_FILE", ".aws/config");
  const auto credentials_path = path_of("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  const std::optional<std::string> config_text = config_path ? read_file(*config_path) : std::nullopt;
  const std::optional<std::string> credentials_text = credentials_path ? read_file(*credentials_path) : std::nullopt;
  const AwsIni config = config_text ? ParseAwsIni(*config_text) : AwsIni{};
  const AwsIni credentials = credentials_text ? ParseAwsIni(*credentials_text) : AwsIni{};

  const std::string config_section = p.name == "default" ? "default" : "profile " + p.name;
  const bool in_config = config.count(config_section) > 0 || (p.name == "default" && config.count("profile default") > 0);
  const bool in_credentials = credentials.count(p.name) > 0;
  if (explicit_profile && !in_config && !in_credentials) {
    return InvalidArgument("AWS profile '" + p.name + "' (from AWS_PROFILE) is in neither " +
                           config_path.value_or("~/.aws/config") + " ([" + config_section + "]) nor " +
                           credentials_path.value_or("~/.aws/credentials") + " ([" + p.name + "])");
  }
  // [profile default] is accepted for the default profile too, as the AWS CLI does.
  const std::string section =
      config.count(config_section) ? config_section : (p.name == "default" ? "profile default" : config_section);
  const std::string config_where = config_path.value_or("") + " [" + section + "]";
  const std::string credentials_where = credentials_path.value_or("") + " [" + p.name + "]";

  auto take = [&](std::optional<std::string>* out, const char* name, const std::string* value, const std::string& where) {
    if (*out || value == nullptr) return;
    *out = *value;
    p.sources[name] = where;
  };
  take(&p.region, "region", Find(config, section, "region"), config_where);
  take(&p.endpoint_url, "endpoint", Find(config, section, "s3.endpoint_url"), config_where);
  take(&p.endpoint_url, "endpoint", Find(config, section, "endpoint_url"), config_where);
  // The credentials file first, as the AWS CLI reads it.
  for (const auto& [key, out] : {std::pair<const char*, std::optional<std::string>*>{"aws_access_key_id", &p.access_key_id},
                                 {"aws_secret_access_key", &p.secret_access_key},
                                 {"aws_session_token", &p.session_token}}) {
    take(out, key, Find(credentials, p.name, key), credentials_where);
    take(out, key, Find(config, section, key), config_where);
  }
  return p;
}

}  // namespace wk
