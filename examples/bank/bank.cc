// bank: one account per actor (acme/bank/alice, acme/bank/bob), and transfers between them
// as messages between actors (docs/sdk.md, "Messages between actors").
//
//   POST /deposit?amount=N           adds N (1 .. 10^15) to the balance; answers the new balance
//   GET  /balance                    the balance ("120\n"); a new account has 0
//   POST /transfer?to=<name>&amount=N
//                                    if the balance holds N: debits it and sends "credit:N" to
//                                    bank/<name>, answering 200 with the message's sequence
//                                    number ("3\n"); else 409 at once, nothing changed
//   GET  /history                    what this account sent and applied, one per line:
//                                    "out bank/<name> seq=<s> amount=<N>", then
//                                    "in <tenant>/bank/<name> seq=<s> amount=<N> retry=<r>"
//                                    (or "refund=<N>", "amount=<N> refused refund_seq=<s>", "bad")
//                                    (the last kLogPerPeer of each sender, oldest first)
//
// Why it is safe: the debit and the message are one event's batch, so they commit together
// or not at all (the money leaves one account only if the credit will reach the other);
// the receiver's handler credits the balance and logs the credit in the batch that also
// records the message as applied, so it takes effect exactly once, and credits from one
// sender arrive in the order it sent them. A credit that would push the balance past its
// bound is answered with a message back, "refund:N", which the sender always takes. A
// malformed message is logged as "bad" and applied as a no-op: failing it would only retry
// it until it is parked as dead.
//
// Keys: "balance" (decimal text), "out/<seq, 20 digits>", "in/<sender>/<seq, 20 digits>".
#include <string>
#include <string_view>

#include "wasmkeep.hpp"

namespace {

constexpr std::string_view kBalance = "balance";
constexpr std::string_view kOut = "out/";
constexpr std::string_view kIn = "in/";
constexpr std::string_view kCredit = "credit:";
constexpr std::string_view kRefund = "refund:";
// The largest amount one request moves, and the largest balance: far from INT64_MAX, so a
// sum of two never overflows.
constexpr int64_t kMaxAmount = 1'000'000'000'000'000;
constexpr int64_t kMaxBalance = 4 * kMaxAmount;
// Log entries kept per peer (outgoing: in all): the history stays small however long an
// account lives.
constexpr int32_t kLogPerPeer = 20;

std::string Padded(int64_t v) {
  std::string digits = std::to_string(v);
  return std::string(digits.size() < 20 ? 20 - digits.size() : 0, '0') + digits;
}

// A positive amount up to kMaxAmount, or nullopt.
std::optional<int64_t> ParseAmount(std::string_view text) {
  std::optional<int64_t> v = wasmkeep::parse_int64(text);
  if (!v || *v <= 0 || *v > kMaxAmount || text[0] == '+') return std::nullopt;
  return v;
}

// An account name as this example accepts it: 1 to 64 letters, digits, '-', '_', '.'.
bool ValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

int64_t Balance() { return wasmkeep::storage::get_int64(kBalance).value_or(0); }

// Appends to the log under prefix and drops its oldest entries past kLogPerPeer.
void Log(const std::string& prefix, int64_t seq, std::string_view line) {
  wasmkeep::storage::put(prefix + Padded(seq), line);
  auto entries = wasmkeep::storage::list({.prefix = prefix, .limit = kLogPerPeer + 1, .reverse = true});
  for (size_t i = kLogPerPeer; i < entries.size(); ++i) wasmkeep::storage::del(entries[i].first);
}

void Deposit(const wasmkeep::Request& req, wasmkeep::Response& res) {
  std::optional<int64_t> amount = ParseAmount(req.query_param("amount").value_or(""));
  if (!amount) return (void)res.text(400, "amount must be a whole number from 1 to 10^15\n");
  const int64_t balance = Balance();
  if (balance > kMaxBalance - *amount) return (void)res.text(409, "the balance would pass its bound\n");
  wasmkeep::storage::put_int64(kBalance, balance + *amount);
  res.text(200, std::to_string(balance + *amount) + "\n");
}

void Transfer(const wasmkeep::Request& req, wasmkeep::Response& res) {
  std::optional<std::string> to = req.query_param("to");
  if (!to || !ValidName(*to)) return (void)res.text(400, "to must be an account name (letters, digits, - _ .)\n");
  std::optional<int64_t> amount = ParseAmount(req.query_param("amount").value_or(""));
  if (!amount) return (void)res.text(400, "amount must be a whole number from 1 to 10^15\n");
  const int64_t balance = Balance();
  if (balance < *amount) return (void)res.text(409, "insufficient funds: the balance is " + std::to_string(balance) + "\n");
  // The debit and the message commit in one batch: both, or (if the event fails) neither.
  wasmkeep::storage::put_int64(kBalance, balance - *amount);
  const std::string target = "bank/" + *to;
  const int64_t seq = wasmkeep::send(target, std::string(kCredit) + std::to_string(*amount));
  Log(std::string(kOut), seq, "out " + target + " seq=" + std::to_string(seq) + " amount=" + std::to_string(*amount));
  res.text(200, std::to_string(seq) + "\n");
}

void History(wasmkeep::Response& res) {
  std::string out;
  for (const auto& [key, line] : wasmkeep::storage::list({.prefix = std::string(kOut)})) out += line + "\n";
  for (const auto& [key, line] : wasmkeep::storage::list({.prefix = std::string(kIn)})) out += line + "\n";
  res.text(200, out);
}

void Handle(const wasmkeep::Request& req, wasmkeep::Response& res) {
  const std::string& path = req.path();
  const std::string& method = req.method();
  const bool get = path == "/balance" || path == "/history";
  const bool post = path == "/deposit" || path == "/transfer";
  if (!get && !post) return (void)res.text(404, "use GET /balance, GET /history, POST /deposit, POST /transfer\n");
  if (method != (get ? "GET" : "POST")) {
    res.header("Allow", get ? "GET" : "POST");
    return (void)res.text(405, "method not allowed\n");
  }
  if (path == "/balance") return (void)res.text(200, std::to_string(Balance()) + "\n");
  if (path == "/history") return History(res);
  if (path == "/deposit") return Deposit(req, res);
  Transfer(req, res);
}

// True if name is "<tenant>/bank/<account>": only accounts move money.
bool FromAnAccount(std::string_view name) {
  const size_t slash = name.find('/');
  return slash != std::string_view::npos && name.substr(slash + 1).starts_with("bank/");
}

// Applies one credit or refund. Runs exactly once per message that a committed event sent.
void OnMessage(const wasmkeep::Message& msg) {
  const std::string& sender = msg.sender();
  const std::string prefix = std::string(kIn) + sender + "/";
  const std::string head = "in " + sender + " seq=" + std::to_string(msg.seq());
  std::string_view body = msg.body();
  const bool refund = body.starts_with(kRefund);
  std::optional<int64_t> amount;
  if (refund) {
    amount = ParseAmount(body.substr(kRefund.size()));
  } else if (body.starts_with(kCredit)) {
    amount = ParseAmount(body.substr(kCredit.size()));
  }
  if (!amount || !FromAnAccount(sender)) {
    wasmkeep::log::warn("bank: a message that is neither a credit nor a refund, from " + sender);
    return Log(prefix, msg.seq(), head + " bad");
  }
  const int64_t balance = Balance();
  if (!refund && balance > kMaxBalance - *amount) {
    // The reply is a message back: the sender gets its money again. A refund is always
    // taken (it returns money that left that account, so it cannot overflow), so two
    // accounts at their bound cannot bounce money between them for ever.
    const int64_t back = wasmkeep::send(sender, std::string(kRefund) + std::to_string(*amount));
    return Log(prefix, msg.seq(), head + " amount=" + std::to_string(*amount) + " refused refund_seq=" + std::to_string(back));
  }
  wasmkeep::storage::put_int64(kBalance, balance + *amount);
  Log(prefix, msg.seq(),
      head + (refund ? " refund=" : " amount=") + std::to_string(*amount) + " retry=" + std::to_string(msg.retry_count()));
}

}  // namespace

WASMKEEP_REQUEST_HANDLER(Handle)
WASMKEEP_MESSAGE_HANDLER(OnMessage)
