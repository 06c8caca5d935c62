#include "cli/actor_api_cmd.h"

#include <algorithm>
#include <cstdio>
#include <variant>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "base/ids.h"
#include "net/http_client.h"
#include "store/open_store.h"

namespace wk::cli {
namespace {

enum class ApiOp : std::uint8_t { kList, kInspect, kDelete, kRetryDead, kDropDead, kRestore, kFork };

struct ApiArgs {
  std::string target;  // TENANT/CLASS or TENANT/CLASS/NAME
  std::string token;
  std::string node;
  std::string prefix;
  std::string after;
  int limit = 0;  // 0: the node's default
  bool all = false;
  bool json = false;
  bool hex = false;
  bool text = false;
  int max_value_bytes = -1;
  std::uint64_t seq = 0;  // kRetryDead, kDropDead: the dead message
  std::string at;         // kRestore, kFork: the point, a time
  std::string batch;      //   or a batch
  std::string to;         // kFork: CLASS/NAME or NAME
};

std::string HexOf(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

// Query values here are names, prefixes and hex: percent-encode anything else anyway.
std::string Escape(std::string_view s) {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
        c == '~') {
      out.push_back(ch);
    } else {
      out += "%" + HexOf(std::string_view(&ch, 1));
    }
  }
  return out;
}

int ExitForStatus(int status) {
  if (status >= 200 && status < 300) return kExitOk;
  if (status == 404) return kExitNotFound;
  if (status == 409) return kExitPreconditionFailed;
  if (status >= 400 && status < 500) return kExitUsage;
  return kExitError;
}

struct Api {
  RealEnv* env;
  HttpClient* client;
  std::string token;
  Duration timeout;

  // One request; the parsed JSON answer, or the exit code after printing why.
  Task<std::variant<nlohmann::json, int>> Send(boost::beast::http::verb method, std::string target) {
    HttpRequest request;
    request.method = method;
    request.target = std::move(target);
    request.headers.emplace_back("Authorization", "Bearer " + token);
    HttpOutcome got = co_await client->Send(std::move(request), env->MonoNow() + timeout);
    if (!got.ok()) {
      std::fprintf(stderr, "wasmkeep: no answer from %s: %s %s\n", client->endpoint().host_header.c_str(),
                   std::string(HttpFailureName(got.failure)).c_str(), got.detail.c_str());
      co_return kExitError;
    }
    const HttpResponse& r = got.response;
    auto body = nlohmann::json::parse(r.body, nullptr, false);
    if (r.status < 200 || r.status >= 300) {
      std::string why = r.body;
      if (!body.is_discarded() && body.is_object() && body.contains("error")) why = body["error"].get<std::string>();
      while (!why.empty() && why.back() == '\n') why.pop_back();
      std::fprintf(stderr, "wasmkeep: HTTP %d: %s\n", r.status, why.c_str());
      co_return ExitForStatus(r.status);
    }
    if (body.is_discarded()) {
      std::fprintf(stderr, "wasmkeep: the node's answer is not JSON\n");
      co_return kExitError;
    }
    co_return body;
  }
};

std::string Str(const nlohmann::json& j, const char* key, const char* otherwise = "-") {
  if (!j.contains(key) || j[key].is_null()) return otherwise;
  if (j[key].is_string()) return j[key].get<std::string>();
  return j[key].dump();
}

Task<int> List(Api api, ApiArgs a) {
  std::string after = a.after;
  nlohmann::json all = nlohmann::json::array();
  bool header = false;
  for (;;) {
    std::string target = "/v1/classes/" + a.target + "/actors?prefix=" + Escape(a.prefix) + "&after=" + Escape(after);
    if (a.limit > 0) target += "&limit=" + std::to_string(a.limit);
    auto got = co_await api.Send(boost::beast::http::verb::get, target);
    if (std::holds_alternative<int>(got)) co_return std::get<int>(got);
    const nlohmann::json& page = std::get<nlohmann::json>(got);
    for (const auto& actor : page["actors"]) {
      if (a.json) {
        all.push_back(actor);
        continue;
      }
      if (!header) {
        std::printf("%-40s %-8s %-20s %10s %12s  %s\n", "NAME", "STATE", "NODE", "GENERATION", "STORED", "ALARM");
        header = true;
      }
      std::string alarm = "-";
      if (actor.contains("alarm_unknown")) {
        alarm = "?";  // its shard of the index could not be read whole
      } else if (actor.contains("alarm_ms") && actor["alarm_ms"].is_number_integer()) {
        alarm = IsoUtc(FromUnixMs(actor["alarm_ms"].get<std::int64_t>()));
      }
      std::printf("%-40s %-8s %-20s %10s %12s  %s\n", Str(actor, "name").c_str(), Str(actor, "state").c_str(),
                  Str(actor, "node").c_str(), Str(actor, "generation").c_str(), Str(actor, "stored_bytes").c_str(),
                  alarm.c_str());
    }
    const bool more = page.contains("next_after") && page["next_after"].is_string();
    if (more) after = page["next_after"].get<std::string>();
    if (!more || !a.all) {
      if (a.json) {
        nlohmann::json out = {{"actors", all}, {"next_after", more ? nlohmann::json(after) : nlohmann::json()}};
        std::printf("%s\n", out.dump(2).c_str());
      } else if (!header) {
        std::printf("(no actors)\n");
      }
      if (more && !a.json) std::printf("(more: --after %s, or --all)\n", after.c_str());
      co_return kExitOk;
    }
  }
}

Task<int> Inspect(Api api, ApiArgs a) {
  std::string after_hex = HexOf(a.after);
  nlohmann::json entries = nlohmann::json::array();
  nlohmann::json first;
  for (bool first_page = true;; first_page = false) {
    // The route is /v1/classes/T/C/actors/NAME.
    const auto last = a.target.rfind('/');
    std::string target = "/v1/classes/" + a.target.substr(0, last) + "/actors/" + a.target.substr(last + 1) + "?prefix=" +
             Escape(a.prefix) + "&after_hex=" + after_hex;
    if (a.limit > 0) target += "&limit=" + std::to_string(a.limit);
    if (a.hex) target += "&format=hex";
    if (a.text) target += "&format=text";
    if (a.max_value_bytes >= 0) target += "&max_value_bytes=" + std::to_string(a.max_value_bytes);
    auto got = co_await api.Send(boost::beast::http::verb::get, target);
    if (std::holds_alternative<int>(got)) co_return std::get<int>(got);
    const nlohmann::json& page = std::get<nlohmann::json>(got);
    if (first_page) {
      first = page;
      if (!a.json) {
        std::printf("actor %s: %s keys, %s bytes, generation %s, read from %s%s\n", Str(page, "actor").c_str(),
                    Str(page, "keys").c_str(), Str(page, "stored_bytes").c_str(), Str(page, "generation").c_str(),
                    Str(page, "source").c_str(),
                    page.contains("node") ? (" (node " + Str(page, "node") + ")").c_str() : "");
        if (page.contains("alarm_ms") && !page["alarm_ms"].is_null()) {
          std::printf("alarm at %s ms\n", Str(page, "alarm_ms").c_str());
        }
      }
    }
    for (const auto& e : page["entries"]) {
      if (a.json) {
        entries.push_back(e);
        continue;
      }
      const bool key_hex = Str(e, "key_encoding") == "hex";
      const bool value_hex = Str(e, "value_encoding") == "hex";
      std::printf("%s%s = %s%s%s\n", key_hex ? "hex:" : "", Str(e, "key").c_str(), value_hex ? "hex:" : "",
                  Str(e, "value").c_str(),
                  e.contains("truncated") ? (" ... (" + Str(e, "value_bytes") + " bytes)").c_str() : "");
    }
    const bool more = page["next_after_hex"].is_string();
    if (more) after_hex = page["next_after_hex"].get<std::string>();
    if (!more || !a.all) {
      if (a.json) {
        first["entries"] = entries;
        first["next_after_hex"] = more ? nlohmann::json(after_hex) : nlohmann::json();
        std::printf("%s\n", first.dump(2).c_str());
      } else if (more) {
        std::printf("(more keys: --all)\n");
      }
      co_return kExitOk;
    }
  }
}

Task<int> Delete(Api api, ApiArgs a) {
  const auto last = a.target.rfind('/');
  const std::string target = "/v1/classes/" + a.target.substr(0, last) + "/actors/" + a.target.substr(last + 1);
  auto got = co_await api.Send(boost::beast::http::verb::delete_, target);
  if (std::holds_alternative<int>(got)) co_return std::get<int>(got);
  const nlohmann::json& r = std::get<nlohmann::json>(got);
  if (a.json) {
    std::printf("%s\n", r.dump(2).c_str());
  } else {
    std::printf("deleted %s on node %s: %s objects, %s bytes; its record names nobody at generation %s (%s)\n",
                Str(r, "actor").c_str(), Str(r, "node").c_str(), Str(r, "objects").c_str(), Str(r, "bytes").c_str(),
                Str(r, "generation").c_str(), Str(r, "record").c_str());
  }
  co_return kExitOk;
}

// `actor messages T/C/N --retry SEQ | --drop SEQ`: the node that holds the actor (this one,
// or the one it forwards to) makes the change at the actor's input gate.
Task<int> ResolveDead(Api api, ApiArgs a, bool retry) {
  const auto last = a.target.rfind('/');
  std::string target = "/v1/classes/" + a.target.substr(0, last) + "/actors/" + a.target.substr(last + 1) +
                       "/messages/dead/" + std::to_string(a.seq);
  if (retry) target += "/retry";
  auto got = co_await api.Send(retry ? boost::beast::http::verb::post : boost::beast::http::verb::delete_, target);
  if (std::holds_alternative<int>(got)) co_return std::get<int>(got);
  const nlohmann::json& r = std::get<nlohmann::json>(got);
  if (a.json) {
    std::printf("%s\n", r.dump(2).c_str());
  } else if (retry) {
    std::printf("dead message %s of %s sent again as message %s (node %s)\n", Str(r, "seq").c_str(),
                Str(r, "actor").c_str(), Str(r, "retried_as").c_str(), Str(r, "node").c_str());
  } else {
    std::printf("dead message %s of %s dropped (node %s)\n", Str(r, "seq").c_str(), Str(r, "actor").c_str(),
                Str(r, "node").c_str());
  }
  co_return kExitOk;
}

// `actor restore` and `actor fork`: the node that holds the actor (this one, or the one it
// forwards to; a fork's new actor is acquired where it is asked) makes the change as its
// owner (docs/storage.md, "History and point-in-time restore").
Task<int> RestoreOrFork(Api api, ApiArgs a, bool fork) {
  const auto last = a.target.rfind('/');
  std::string target = "/v1/classes/" + a.target.substr(0, last) + "/actors/" + a.target.substr(last + 1) +
                       (fork ? "/fork?" : "/restore?") + (a.at.empty() ? "batch=" + Escape(a.batch) : "at=" + Escape(a.at));
  if (fork) target += "&to=" + Escape(a.to);
  auto got = co_await api.Send(boost::beast::http::verb::post, target);
  if (std::holds_alternative<int>(got)) co_return std::get<int>(got);
  const nlohmann::json& r = std::get<nlohmann::json>(got);
  if (a.json) {
    std::printf("%s\n", r.dump(2).c_str());
  } else if (fork) {
    std::printf("forked %s at batch %s into %s (generation %s, node %s)\n", Str(r, "forked_from").c_str(),
                Str(r, "from", "none (the empty state)").c_str(), Str(r, "actor").c_str(),
                Str(r, "generation").c_str(), Str(r, "node").c_str());
  } else {
    std::printf("restored %s to batch %s as batch %s (generation %s, node %s)%s%s\n", Str(r, "actor").c_str(),
                Str(r, "to", "none (the empty state)").c_str(), Str(r, "batch").c_str(), Str(r, "generation").c_str(),
                Str(r, "node").c_str(), r.contains("undo") ? "; undo with --batch " : "",
                r.contains("undo") ? Str(r, "undo").c_str() : "");
  }
  co_return kExitOk;
}

int RunApi(const GlobalOptions& g, ApiArgs a, ApiOp op) {
  // The name first: a typo costs no request.
  const int parts_wanted = op == ApiOp::kList ? 2 : 3;
  {
    std::string probe = a.target;
    if (op == ApiOp::kList) probe += "/n";
    auto id = ParseActorId(probe);
    if (!id.ok() || static_cast<int>(std::count(a.target.begin(), a.target.end(), '/')) != parts_wanted - 1) {
      return Fail(InvalidArgument(std::string(op == ApiOp::kList ? "expected TENANT/CLASS" : "expected TENANT/CLASS/NAME") +
                                  (id.ok() ? "" : ": " + id.status().message())));
    }
  }
  if (a.hex && a.text) return Fail(InvalidArgument("--hex and --text exclude each other"));
  if ((op == ApiOp::kRestore || op == ApiOp::kFork) && a.at.empty() == a.batch.empty()) {
    return Fail(InvalidArgument("give the point with --at TIME or --batch ID, one of them"));
  }
  if ((op == ApiOp::kRetryDead || op == ApiOp::kDropDead) && a.seq == 0) {
    return Fail(InvalidArgument("a dead message's number is a whole number from 1 (as `actor messages` lists it)"));
  }
  auto config = LoadConfigFromOptions(g);
  if (!config.ok()) return Fail(config.status());
  auto call = CallOptionsFrom(g);
  if (!call.ok()) return Fail(call.status());
  if (a.token.empty()) {
    if (auto t = ProcessGetEnv("WASMKEEP_TOKEN")) a.token = *t;
  }
  if (a.token.empty()) {
    return Fail(InvalidArgument("no token: pass --token or set WASMKEEP_TOKEN (a tenant's, or an operator's from "
                                "`wasmkeep admin token add`)"));
  }
  // As `call`: a bare HOST:PORT is http://, or https:// when the config gives the client
  // API a certificate (then trusted as a CA here).
  std::string node = a.node.empty() ? config->listen.value_or("127.0.0.1:8080") : a.node;
  if (!node.starts_with("http://") && !node.starts_with("https://")) {
    node = (config->tls_cert_file ? "https://" : "http://") + node;
  }
  HttpClientOptions client_options;
  if (config->tls_cert_file) {
    std::ifstream cert(*config->tls_cert_file, std::ios::binary);
    if (!cert) return Fail(InvalidArgument("cannot read node.tls_cert_file " + *config->tls_cert_file));
    client_options.extra_ca_pem.assign(std::istreambuf_iterator<char>(cert), {});
  }
  RealEnv env;
  auto endpoint = ParseHttpEndpoint(node);
  if (!endpoint.ok()) return Fail(InvalidArgument("bad --node " + node + ": " + endpoint.status().message()));
  auto client = HttpClient::Create(env, *endpoint, client_options);
  if (!client.ok()) return Fail(client.status());
  Api api{&env, client->get(), a.token, call->timeout};
  int code = kExitError;
  switch (op) {
    case ApiOp::kList: code = env.RunMain(List(api, a)); break;
    case ApiOp::kInspect: code = env.RunMain(Inspect(api, a)); break;
    case ApiOp::kDelete: code = env.RunMain(Delete(api, a)); break;
    case ApiOp::kRetryDead: code = env.RunMain(ResolveDead(api, a, true)); break;
    case ApiOp::kDropDead: code = env.RunMain(ResolveDead(api, a, false)); break;
    case ApiOp::kRestore: code = env.RunMain(RestoreOrFork(api, a, false)); break;
    case ApiOp::kFork: code = env.RunMain(RestoreOrFork(api, a, true)); break;
  }
  (*client)->Shutdown();
  return code;
}

void CommonOptions(CLI::App* c, ApiArgs* a) {
  c->add_option("--token", a->token, "A tenant's token (its own actors) or an operator's (default: WASMKEEP_TOKEN)");
  c->add_option("--node", a->node,
                "Node address HOST:PORT or http(s)://HOST:PORT (default: the config's node.listen, else 127.0.0.1:8080)");
  c->add_flag("--json", a->json, "Print JSON");
}

}  // namespace

void AddActorApiCommands(CLI::App& actor, const GlobalOptions& globals, int* result) {
  auto list = std::make_shared<ApiArgs>();
  CLI::App* l = actor.add_subcommand("list", "List a class's actors (name, holder, generation, stored size) through a node");
  l->add_option("class", list->target, "TENANT/CLASS")->required();
  l->add_option("--prefix", list->prefix, "Only names starting with this");
  l->add_option("--after", list->after, "Only names after this one (the page before's last)");
  l->add_option("--limit", list->limit, "Actors per page (1-500; default 50)");
  l->add_flag("--all", list->all, "Every page");
  CommonOptions(l, list.get());
  l->callback([&globals, list, result] { *result = RunApi(globals, *list, ApiOp::kList); });

  auto inspect = std::make_shared<ApiArgs>();
  CLI::App* i = actor.add_subcommand("inspect", "Show an actor's keys and values (from its owner, else the bucket)");
  i->add_option("actor", inspect->target, "TENANT/CLASS/NAME")->required();
  i->add_option("--prefix", inspect->prefix, "Only keys starting with this");
  i->add_option("--after", inspect->after, "Only keys after this one");
  i->add_option("--limit", inspect->limit, "Keys per page (1-1000; default 100)");
  i->add_option("--max-value-bytes", inspect->max_value_bytes, "Bytes of each value shown (default 1024)");
  i->add_flag("--all", inspect->all, "Every page");
  i->add_flag("--hex", inspect->hex, "Keys and values in hex");
  i->add_flag("--text", inspect->text, "Keys and values as text (invalid UTF-8 shown as U+FFFD)");
  CommonOptions(i, inspect.get());
  i->callback([&globals, inspect, result] { *result = RunApi(globals, *inspect, ApiOp::kInspect); });

  auto del = std::make_shared<ApiArgs>();
  CLI::App* d = actor.add_subcommand("delete", "Delete an actor's state and log (acquiring it first, so no owner acts)");
  d->add_option("actor", del->target, "TENANT/CLASS/NAME")->required();
  CommonOptions(d, del.get());
  d->callback([&globals, del, result] { *result = RunApi(globals, *del, ApiOp::kDelete); });

  // Point-in-time restore and fork (docs/storage.md, "History and point-in-time restore").
  auto restore = std::make_shared<ApiArgs>();
  CLI::App* r = actor.add_subcommand(
      "restore", "Make an actor's state at a point of its history its current state (as its owner, at a new generation)");
  r->add_option("actor", restore->target, "TENANT/CLASS/NAME")->required();
  r->add_option("--at", restore->at, "The time: RFC 3339 or Unix ms (the state of every batch durable by then)");
  r->add_option("--batch", restore->batch, "The batch GEN-SEG.INDEX, as `actor history` lists it");
  CommonOptions(r, restore.get());
  r->callback([&globals, restore, result] { *result = RunApi(globals, *restore, ApiOp::kRestore); });

  auto fork = std::make_shared<ApiArgs>();
  CLI::App* f = actor.add_subcommand("fork", "Make a new actor of the same tenant with an actor's state at a point");
  f->add_option("actor", fork->target, "TENANT/CLASS/NAME (the source)")->required();
  f->add_option("--at", fork->at, "The time: RFC 3339 or Unix ms");
  f->add_option("--batch", fork->batch, "The batch GEN-SEG.INDEX, as `actor history` lists it");
  f->add_option("--to", fork->to, "The new actor: CLASS/NAME (any class of the tenant) or NAME (the same class)")
      ->required();
  CommonOptions(f, fork.get());
  f->callback([&globals, fork, result] { *result = RunApi(globals, *fork, ApiOp::kFork); });
}

int RunDeadMessage(const GlobalOptions& globals, const DeadMessageArgs& args) {
  ApiArgs a;
  a.target = args.actor;
  a.token = args.token;
  a.node = args.node;
  a.json = args.json;
  a.seq = args.seq;
  return RunApi(globals, std::move(a), args.retry ? ApiOp::kRetryDead : ApiOp::kDropDead);
}

}  // namespace wk::cli
