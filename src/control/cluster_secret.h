// The cluster secret: 32 random bytes shared by the nodes of a cluster, with which
// node-to-node requests are signed (routing/forwarder.h). The first node to start creates
// it; every other node reads the same one.
//
// Object (FROZEN; the decoder is strict and answers kFatal("corrupt ...") otherwise):
//
//   control/cluster-secret            wasmkeep-secret 1
//                                     secret <64 hex: 32 random bytes>
//                                     created_at <unix ms>
//
// The secret is create-only (If-None-Match: *) and never replaced, even when corrupt. Its
// bytes come from OpenSSL's CSPRNG, never from Env (env.h: Env randomness is not for
// secrets).
//
// Threading: ClusterSecret is a plain value (Sign and Verify are pure); EnsureClusterSecret
// runs on the Env loop of the given store, and on mem:// in tests and the simulator.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "base/time.h"
#include "env/env.h"
#include "store/object_store.h"

namespace wk::control {

inline constexpr std::string_view kClusterSecretKey = "control/cluster-secret";

// 32 random bytes shared by the nodes of a cluster: node-to-node requests carry an
// HMAC-SHA256 made with it.
struct ClusterSecret {
  std::array<std::uint8_t, 32> bytes{};

  // HMAC-SHA256 of message, 64 lowercase hex characters.
  std::string Sign(std::string_view message) const;
  // Whether mac_hex is Sign(message), compared in constant time.
  bool Verify(std::string_view message, std::string_view mac_hex) const;
};

// REQUIRES (checked): created_at is not before 1970.
std::string EncodeClusterSecret(const ClusterSecret& secret, WallTime created_at);
// kFatal("corrupt ...: line N: ...") for anything but the exact format above.
Result<ClusterSecret> DecodeClusterSecret(std::string_view body);

// Reads control/cluster-secret, creating it (If-None-Match: *) if it is absent: the first
// node to start creates it, every other node reads the same one. Unknown outcomes and
// lost races are resolved by reading back. kFatal for a corrupt object (never replaced).
Task<Result<ClusterSecret>> EnsureClusterSecret(ObjectStore& store, Env& env, CallOptions call = {});

}  // namespace wk::control
