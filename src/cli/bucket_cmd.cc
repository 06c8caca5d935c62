#include "cli/bucket_cmd.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>


namespace wk::cli {

namespace {

struct BucketArgs {
  std::string prefix;
  bool long_format = false;
  bool json = false;
  std::string key;
  std::string file;
  std::string output;
  bool if_none_match = false;
  std::string if_match;
};

Precondition ConditionFrom(const BucketArgs& a) {
  if (a.if_none_match) return Precondition::IfNoneMatchAny();
  if (!a.if_match.empty()) return Precondition::IfMatch(Version(a.if_match));
  return Precondition::None();
}

Task<int> Ls(ObjectStore& store, BucketArgs a, CallOptions call) {
  ListOptions options;
  options.prefix = a.prefix;
  nlohmann::json all = nlohmann::json::array();
  // A bound on pages keeps a mistaken `ls` of a huge bucket from running forever.
  constexpr int kMaxPages = 100'000;
  for (int pages = 0; pages < kMaxPages; ++pages) {
    auto page = co_await store.List(options, call);
    if (!page.ok()) co_return Fail(page.status());
    for (const auto& e : page->entries) {
      if (a.json) {
        all.push_back({{"key", e.key}, {"version", e.version.token()}, {"size", e.size}});
      } else if (a.long_format) {
        std::printf("%12llu  %s  %s\n", static_cast<unsigned long long>(e.size),
                    e.version.token().c_str(), e.key.c_str());
      } else {
        std::printf("%s\n", e.key.c_str());
      }
    }
    if (!page->next_continuation) break;
    options.continuation = *page->next_continuation;
  }
  if (a.json) std::printf("%s\n", all.dump(2).c_str());
  co_return kExitOk;
}

Task<int> Get(ObjectStore& store, BucketArgs a, CallOptions call) {
  auto got = co_await store.Get(a.key, call);
  if (!got.ok()) co_return Fail(got.status());
  if (a.output.empty() || a.output == "-") {
    std::fwrite(got->body.data(), 1, got->body.size(), stdout);
  } else {
    std::ofstream out(a.output, std::ios::binary | std::ios::trunc);
    out.write(got->body.data(), static_cast<std::streamsize>(got->body.size()));
    if (!out) co_return Fail(Fatal("cannot write " + a.output));
  }
  std::fprintf(stderr, "version: %s\n", got->version.token().c_str());
  co_return kExitOk;
}

Task<int> Put(ObjectStore& store, BucketArgs a, CallOptions call) {
  std::string body;
  if (a.file == "-") {
    body.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream in(a.file, std::ios::binary);
    if (!in) co_return Fail(InvalidArgument("cannot read " + a.file));
    body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto put = co_await store.Put(a.key, std::move(body), ConditionFrom(a), call);
  if (!put.ok()) co_return Fail(put.status());
  std::printf("%s\n", put->token().c_str());
  co_return kExitOk;
}

Task<int> Rm(ObjectStore& store, BucketArgs a, CallOptions call) {
  Status s = co_await store.Delete(a.key, ConditionFrom(a), call);
  if (!s.ok()) co_return Fail(s);
  co_return kExitOk;
}

// mode: only `bucket put` may create the bucket; ls, get and rm need an existing one.
int RunBucket(const GlobalOptions& g, const BucketArgs& a,
              Task<int> (*op)(ObjectStore&, BucketArgs, CallOptions), BucketOpen mode = BucketOpen::kMustExist) {
  auto call = CallOptionsFrom(g);
  if (!call.ok()) return Fail(call.status());
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  RealEnv env;
  auto store = OpenBucket(env, g, *config, mode);
  if (!store.ok()) return FailOpen(store.status());
  return env.RunMain(op(**store, a, *call));
}

}  // namespace

void AddBucketCommand(CLI::App& app, const GlobalOptions& globals, int* result) {
  auto args = std::make_shared<BucketArgs>();
  CLI::App* bucket = app.add_subcommand("bucket", "Read and write objects in the bucket");
  bucket->require_subcommand(1);

  CLI::App* ls = bucket->add_subcommand("ls", "List keys under a prefix, in byte order");
  ls->add_option("prefix", args->prefix, "Key prefix (default: everything)");
  ls->add_flag("-l,--long", args->long_format, "Show size and version");
  ls->add_flag("--json", args->json, "Print a JSON array of {key, version, size}");
  ls->callback([&globals, args, result] { *result = RunBucket(globals, *args, Ls); });

  CLI::App* get = bucket->add_subcommand("get", "Print an object's body (its version goes to stderr)");
  get->add_option("key", args->key, "Object key")->required();
  get->add_option("-o,--output", args->output, "Write the body to FILE instead of stdout");
  get->callback([&globals, args, result] { *result = RunBucket(globals, *args, Get); });

  CLI::App* put = bucket->add_subcommand("put", "Write FILE (or - for stdin) under KEY; prints the new version");
  put->add_option("key", args->key, "Object key")->required();
  put->add_option("file", args->file, "File to upload, or - for stdin")->required();
  auto* inm = put->add_flag("--if-none-match", args->if_none_match,
                            "Create only: fail (exit 3) if KEY exists");
  auto* im = put->add_option("--if-match", args->if_match,
                             "Replace only version VERSION: fail (exit 3) otherwise");
  inm->excludes(im);
  put->callback([&globals, args, result] { *result = RunBucket(globals, *args, Put, BucketOpen::kCreateIfMissing); });

  CLI::App* rm = bucket->add_subcommand("rm", "Delete KEY");
  rm->add_option("key", args->key, "Object key")->required();
  rm->add_option("--if-match", args->if_match, "Delete only version VERSION (stores that support it)");
  rm->callback([&globals, args, result] { *result = RunBucket(globals, *args, Rm); });
}

}  // namespace wk::cli
