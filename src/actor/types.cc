#include "actor/types.h"

namespace wk::actor {

std::string_view EventOutcomeName(EventOutcome o) {
  switch (o) {
    case EventOutcome::kOk: return "ok";
    case EventOutcome::kBadRequest: return "bad_request";
    case EventOutcome::kNotFound: return "not_found";
    case EventOutcome::kOverloaded: return "overloaded";
    case EventOutcome::kOverQuota: return "over_quota";
    case EventOutcome::kActorFailed: return "actor_failed";
    case EventOutcome::kUnavailable: return "unavailable";
    case EventOutcome::kInvalidHeader: return "invalid_header";
    case EventOutcome::kKeyReused: return "key_reused";
  }
  return "?";
}

}  // namespace wk::actor
