#include "store/object_store.h"

#include <string>

#include "base/utf8.h"

namespace wk {

std::string Precondition::ToString() const {
  switch (kind_) {
    case Kind::kNone: return "unconditional";
    case Kind::kIfNoneMatchAny: return "If-None-Match: *";
    case Kind::kIfMatch: return "If-Match: " + version_.token();
  }
  return "?";
}

std::string_view BucketPurposeName(BucketPurpose purpose) {
  switch (purpose) {
    case BucketPurpose::kLease: return "lease";
    case BucketPurpose::kListing: return "listing";
    case BucketPurpose::kFence: return "fence";
    case BucketPurpose::kOwner: return "owner";
    case BucketPurpose::kSegment: return "segment";
    case BucketPurpose::kSnapshot: return "snapshot";
    case BucketPurpose::kRestore: return "restore";
    case BucketPurpose::kGc: return "gc";
    case BucketPurpose::kAlarm: return "alarm";
    case BucketPurpose::kControl: return "control";
    case BucketPurpose::kClass: return "class";
    case BucketPurpose::kAdmin: return "admin";
    case BucketPurpose::kOther:
    case BucketPurpose::kCount: break;
  }
  return "other";
}

bool BucketPurposeIsUrgent(BucketPurpose purpose) {
  switch (purpose) {
    case BucketPurpose::kLease:
    case BucketPurpose::kListing:
    case BucketPurpose::kFence:
    case BucketPurpose::kOwner: return true;
    default: return false;
  }
}


Status ValidateKey(std::string_view key) {
  if (key.empty()) return InvalidArgument("key is empty");
  if (key.size() > kMaxKeyBytes) {
    return InvalidArgument("key is " + std::to_string(key.size()) + " bytes; the limit is " +
                           std::to_string(kMaxKeyBytes));
  }
  for (char ch : key) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7F) {
      return InvalidArgument("key contains a control character (byte " + std::to_string(c) +
                             ")");
    }
  }
  if (!IsValidUtf8(key)) return InvalidArgument("key is not valid UTF-8");
  return Status::Ok();
}

Status ValidateListOptions(const ListOptions& options) {
  if (options.page_size < 1 || options.page_size > kMaxListPageSize) {
    return InvalidArgument("list page size " + std::to_string(options.page_size) +
                           " is outside 1.." + std::to_string(kMaxListPageSize));
  }
  for (std::string_view part : {std::string_view(options.prefix),
                                std::string_view(options.start_after)}) {
    if (part.size() > kMaxKeyBytes) return InvalidArgument("list prefix or start-after too long");
    for (char ch : part) {
      auto c = static_cast<unsigned char>(ch);
      if (c < 0x20 || c == 0x7F) return InvalidArgument("list prefix contains a control character");
    }
  }
  return Status::Ok();
}

Task<Result<BucketClock>> ObjectStore::BucketTime(CallOptions) {
  co_return NotFound(Describe() + " cannot tell the bucket's clock");
}

}  // namespace wk
