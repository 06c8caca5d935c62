// The control plane on mem:// in virtual time: tenant records and tokens, TenantAuth and its
// cache, the cluster secret, class deployment; strict decoders, races and lost replies.
#include "server/control.h"

#include <gtest/gtest.h>

#include <random>

#include "env/sim_env.h"
#include "store/mem/mem_store.h"

namespace wk::control {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct ControlTest : ::testing::Test {
  SimWorld world{11};
  std::shared_ptr<MemBucket> bucket = std::make_shared<MemBucket>();
  SimEnv env{world, FromUnixMs(1'764'000'000'000)};
  MemStore store{env, bucket};

  template <typename T>
  T Run(Task<T> t) {
    auto out = RunTask(world, env, std::move(t), seconds(600));
    EXPECT_TRUE(out.has_value()) << "the task did not finish";
    return std::move(*out);
  }
  NewToken Create(const std::string& tenant) {
    auto r = Run(CreateTenant(store, env, tenant));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r.value() : NewToken{};
  }
  Result<std::string> Auth(TenantAuth& auth, const std::string& header) { return Run(auth.Authenticate(header)); }
  void Corrupt(const std::string& key, std::string body) {
    ASSERT_TRUE(bucket->ApplyPut(key, std::move(body), Precondition::None()).ok());
  }
};

TEST(ControlFormatTest, TenantRecordRoundTripAndExactEncoding) {
  TenantRecord r{"acme", FromUnixMs(1000), 3,
                 {{"0123456789abcdef", std::string(64, 'a'), FromUnixMs(2000)},
                  {"fedcba9876543210", std::string(64, 'b'), FromUnixMs(3000)}}};
  const std::string body = EncodeTenantRecord(r);
  EXPECT_EQ(body, "wasmkeep-tenant 1\ntenant acme\ncreated_at 1000\nrevision 3\ntoken 0123456789abcdef " +
                      std::string(64, 'a') + " 2000\ntoken fedcba9876543210 " + std::string(64, 'b') + " 3000\n");
  EXPECT_EQ(DecodeTenantRecord(body, "acme").value(), r);
  TenantRecord empty{"acme", FromUnixMs(1), 1, {}};
  EXPECT_EQ(DecodeTenantRecord(EncodeTenantRecord(empty), "acme").value(), empty);
}

TEST(ControlFormatTest, StrictTenantDecoder) {
  const std::string tok = "token 0123456789abcdef " + std::string(64, 'a') + " 2000\n";
  for (const std::string& bad : std::vector<std::string>{"", "wasmkeep-tenant 1\n",
                                 "wasmkeep-tenant 2\ntenant acme\ncreated_at 1\nrevision 1\n",
                                 std::string("wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision 1"),
                                 std::string("wasmkeep-tenant 1\ntenant other\ncreated_at 1\nrevision 1\n"),
                                 std::string("wasmkeep-tenant 1\ntenant acme\ncreated_at 01\nrevision 1\n"),
                                 std::string("wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision 0\n"),
                                 std::string("wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision -1\n"),
                                 "wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision 1\n" + tok + tok,
                                 "wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision 1\ntoken 0123456789ABCDEF " +
                                     std::string(64, 'a') + " 1\n",
                                 "wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision 1\ntoken 0123456789abcdef " +
                                     std::string(63, 'a') + " 1\n",
                                 "wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision 1\n" + tok + "\n",
                                 "wasmkeep-tenant 1\ntenant acme\ncreated_at 1\nrevision 1\nextra\n"}) {
    auto d = DecodeTenantRecord(bad, "acme");
    EXPECT_FALSE(d.ok()) << bad;
    if (!d.ok()) { EXPECT_EQ(d.code(), Code::kFatal) << bad; }
  }
}

TEST(ControlFormatTest, MutatedBodiesNeverCrashAndAcceptedOnesRoundTrip) {
  std::mt19937_64 rng(5);
  TenantRecord r{"acme", FromUnixMs(1000), 3, {{"0123456789abcdef", std::string(64, 'a'), FromUnixMs(2000)}}};
  const std::string good_tenant = EncodeTenantRecord(r);
  const std::string good_class =
      EncodeClassPointer("acme", "counter", ClassVersion{ModuleDigest{std::string(64, 'c')}, 10, FromUnixMs(5)});
  ClusterSecret secret;
  const std::string good_secret = EncodeClusterSecret(secret, FromUnixMs(9));
  for (int i = 0; i < 20'000; ++i) {
    std::string t = good_tenant, c = good_class, s = good_secret;
    for (std::string* body : {&t, &c, &s}) {
      (*body)[rng() % body->size()] = static_cast<char>(rng() % 256);
      if (rng() % 4 == 0) body->resize(rng() % body->size());
    }
    if (auto d = DecodeTenantRecord(t, "acme"); d.ok()) { EXPECT_EQ(EncodeTenantRecord(*d), t); }
    if (auto d = DecodeClassPointer(c, "acme", "counter"); d.ok()) {
      EXPECT_EQ(EncodeClassPointer("acme", "counter", *d), c);
    }
    if (auto d = DecodeClusterSecret(s); d.ok()) {
      // Header and secret lines (90 bytes) round-trip; created_at is not part of the value.
      EXPECT_EQ(EncodeClusterSecret(*d, FromUnixMs(9)).substr(0, 90), s.substr(0, 90));
    }
  }
}

TEST(ControlFormatTest, ClassPointerAndSecretFormats) {
  ClassVersion v{ModuleDigest{std::string(64, 'c')}, 1234, FromUnixMs(77)};
  const std::string body = EncodeClassPointer("acme", "counter", v);
  EXPECT_EQ(body, "wasmkeep-class 1\nclass acme/counter\nmodule " + std::string(64, 'c') + "\nsize 1234\ndeployed_at 77\n");
  EXPECT_EQ(DecodeClassPointer(body, "acme", "counter").value(), v);
  EXPECT_EQ(DecodeClassPointer(body, "acme", "other").code(), Code::kFatal) << "a pointer copied to another class";
  EXPECT_EQ(DecodeClassPointer("wasmkeep-class 1\n", "acme", "counter").code(), Code::kFatal);

  ClusterSecret s;
  for (std::size_t i = 0; i < s.bytes.size(); ++i) s.bytes[i] = static_cast<std::uint8_t>(i * 7);
  auto back = DecodeClusterSecret(EncodeClusterSecret(s, FromUnixMs(1)));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->bytes, s.bytes);
  EXPECT_EQ(DecodeClusterSecret("wasmkeep-secret 1\nsecret abc\ncreated_at 1\n").code(), Code::kFatal);
  EXPECT_EQ(DecodeClusterSecret("").code(), Code::kFatal);
}

TEST(ControlFormatTest, NamesAndTokens) {
  EXPECT_TRUE(ValidateTenantName("acme-1_x").ok());
  for (const std::string& bad : std::vector<std::string>{"", "Acme", "-acme", "a.b", "a/b", "..", std::string(64, 'a')}) {
    Status s = ValidateTenantName(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("tenant"), std::string::npos) << s.message();
  }
  Status c = ValidateClassName("Counter");
  EXPECT_EQ(c.code(), Code::kInvalidArgument);
  EXPECT_NE(c.message().find("class 'Counter'"), std::string::npos) << c.message();

  const std::string secret(64, '1');
  auto p = ParseToken("wk.acme.0123456789abcdef." + secret);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tenant, "acme");
  EXPECT_EQ(p->token_id, "0123456789abcdef");
  for (const std::string& bad :
       std::vector<std::string>{"wk.acme.0123456789abcdef", "xx.acme.0123456789abcdef." + secret, "wk.Acme.0123456789abcdef." + secret,
        "wk.acme.0123456789abcde." + secret, "wk.acme.0123456789abcdef." + secret + ".x",
        "wk.acme.0123456789abcdef." + std::string(64, 'G'), "wk..0123456789abcdef." + secret}) {
    auto r = ParseToken(bad);
    EXPECT_EQ(r.code(), Code::kInvalidArgument) << bad;
    if (!r.ok()) { EXPECT_EQ(r.status().message().find(secret), std::string::npos) << "never echoes the secret"; }
  }
}

TEST_F(ControlTest, CreateTenantStoresOnlyTheHashAndTheTokenOpensIt) {
  NewToken t = Create("acme");
  EXPECT_EQ(t.tenant, "acme");
  EXPECT_TRUE(t.token.starts_with("wk.acme." + t.token_id + "."));
  const std::string body = bucket->objects().at("control/tenants/acme").body;
  const std::string secret = t.token.substr(t.token.rfind('.') + 1);
  EXPECT_EQ(body.find(secret), std::string::npos) << "the secret itself is never stored";
  auto record = DecodeTenantRecord(body, "acme");
  ASSERT_TRUE(record.ok());
  ASSERT_EQ(record->tokens.size(), 1u);
  EXPECT_EQ(record->tokens[0].id, t.token_id);
  EXPECT_EQ(record->tokens[0].created_at, env.WallNow());

  TenantAuth auth(env, store);
  EXPECT_EQ(Auth(auth, "Bearer " + t.token).value(), "acme");
  EXPECT_EQ(Auth(auth, "bearer  " + t.token + " ").value(), "acme") << "scheme is case-insensitive";
}

TEST_F(ControlTest, DuplicateTenantAndBadNamesAreRefused) {
  Create("acme");
  auto again = Run(CreateTenant(store, env, "acme"));
  EXPECT_EQ(again.code(), Code::kPreconditionFailed);
  EXPECT_NE(again.status().message().find("already exists"), std::string::npos);
  auto bad = Run(CreateTenant(store, env, "Bad.Name"));
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("tenant 'Bad.Name'"), std::string::npos);
  EXPECT_EQ(Run(AddToken(store, env, "nobody")).code(), Code::kNotFound);
}

TEST_F(ControlTest, TokensAddRevokeAndRevocationTakesEffectWithinTheCacheTtl) {
  NewToken first = Create("acme");
  auto second = Run(AddToken(store, env, "acme"));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_NE(second->token_id, first.token_id);
  TenantAuth auth(env, store);
  EXPECT_EQ(Auth(auth, "Bearer " + first.token).value(), "acme");
  EXPECT_EQ(Auth(auth, "Bearer " + second->token).value(), "acme");

  ASSERT_TRUE(Run(RevokeToken(store, env, "acme", first.token_id)).ok());
  // Within the TTL this node may still answer from its cache; from TTL on, never.
  world.RunFor(kDefaultAuthCacheTtl);
  EXPECT_EQ(Auth(auth, "Bearer " + first.token).code(), Code::kNotFound);
  EXPECT_EQ(Auth(auth, "Bearer " + second->token).value(), "acme");
  // A node without a cache refuses at once.
  TenantAuth fresh(env, store);
  EXPECT_EQ(Auth(fresh, "Bearer " + first.token).code(), Code::kNotFound);

  EXPECT_EQ(Run(RevokeToken(store, env, "acme", first.token_id)).code(), Code::kNotFound) << "already revoked";
  EXPECT_EQ(Run(RevokeToken(store, env, "acme", "nothex")).code(), Code::kInvalidArgument);
  EXPECT_EQ(Run(RevokeToken(store, env, "ghost", first.token_id)).code(), Code::kNotFound);
  auto record = Run(ReadTenant(store, "acme"));
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->tokens.size(), 1u);
  EXPECT_EQ(record->revision, 3u) << "created, added, revoked";
}

TEST_F(ControlTest, ATokenOpensItsOwnTenantOnly) {
  NewToken acme = Create("acme");
  Create("globex");
  TenantAuth auth(env, store);
  EXPECT_EQ(Auth(auth, "Bearer " + acme.token).value(), "acme");
  // The same id and secret presented as globex's: refused.
  std::string forged = acme.token;
  forged.replace(3, 4, "globex");
  EXPECT_EQ(Auth(auth, "Bearer " + forged).code(), Code::kNotFound);
  // A wrong secret with a right id: refused.
  std::string wrong = acme.token;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_EQ(Auth(auth, "Bearer " + wrong).code(), Code::kNotFound);
  // Unknown tenant.
  std::string ghost = acme.token;
  ghost.replace(3, 4, "ghost");
  auto r = Auth(auth, "Bearer " + ghost);
  EXPECT_EQ(r.code(), Code::kNotFound);
  EXPECT_EQ(r.status().message(), Auth(auth, "Bearer " + wrong).status().message()) << "one message for all";
}

TEST_F(ControlTest, MalformedAuthorizationIsInvalidArgument) {
  NewToken t = Create("acme");
  TenantAuth auth(env, store);
  for (const std::string& bad : std::vector<std::string>{"", "Bearer", "Bearer ", "Basic " + t.token,
                                 t.token, "Bearer wk.acme.x.y", "Bearer " + t.token + "x", "Bearer " + t.token + " x"}) {
    EXPECT_EQ(Auth(auth, bad).code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_EQ(auth.reads(), 0u) << "malformed tokens cost no GET";
}

TEST_F(ControlTest, TheCacheReadsATenantOncePerTtlAndConcurrentRequestsShareOneRead) {
  NewToken t = Create("acme");
  TenantAuth auth(env, store);
  const std::string header = "Bearer " + t.token;
  for (int i = 0; i < 100; ++i) ASSERT_EQ(Auth(auth, header).value(), "acme");
  EXPECT_EQ(auth.reads(), 1u);
  world.RunFor(kDefaultAuthCacheTtl);
  // 20 requests at once on a stale entry, each GET taking 5 ms: one GET.
  store.set_fault_hook([](const OpInfo&) { return OpFault{milliseconds(5)}; });
  std::vector<std::optional<Result<std::string>>> out(20);
  for (auto& slot : out) {
    env.Spawn([](TenantAuth* a, std::string h, std::optional<Result<std::string>>* o) -> Task<void> {
      o->emplace(co_await a->Authenticate(h));
    }(&auth, header, &slot), "auth");
  }
  world.RunUntilIdle();
  for (auto& slot : out) {
    ASSERT_TRUE(slot.has_value());
    EXPECT_EQ(slot->value(), "acme");
  }
  EXPECT_EQ(auth.reads(), 2u);
  // Unknown tenants are cached too: a flood of bad tokens for one name costs one GET a TTL.
  std::string ghost = t.token;
  ghost.replace(3, 4, "ghost");
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Auth(auth, "Bearer " + ghost).code(), Code::kNotFound);
  EXPECT_EQ(auth.reads(), 3u);
  // A bucket failure is not answered from the stale entry.
  world.RunFor(kDefaultAuthCacheTtl);
  store.set_fault_hook([](const OpInfo&) { return OpFault{Duration(0), Duration(0), Retryable("503 SlowDown")}; });
  EXPECT_EQ(Auth(auth, header).code(), Code::kRetryable);
  store.set_fault_hook(nullptr);
  EXPECT_EQ(Auth(auth, header).value(), "acme");
}

TEST_F(ControlTest, CorruptObjectsAreRefusedNeverTreatedAsEmpty) {
  NewToken t = Create("acme");
  Corrupt("control/tenants/acme", "wasmkeep-tenant 1\ngarbage\n");
  TenantAuth auth(env, store);
  EXPECT_EQ(Auth(auth, "Bearer " + t.token).code(), Code::kFatal);
  EXPECT_EQ(Run(AddToken(store, env, "acme")).code(), Code::kFatal);
  EXPECT_EQ(Run(RevokeToken(store, env, "acme", t.token_id)).code(), Code::kFatal);
  EXPECT_EQ(Run(CreateTenant(store, env, "acme")).code(), Code::kPreconditionFailed) << "never overwritten";
  EXPECT_EQ(bucket->objects().at("control/tenants/acme").body, "wasmkeep-tenant 1\ngarbage\n");
  auto list = Run(ListTenants(store));
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_FALSE((*list)[0].record.has_value());
  EXPECT_NE((*list)[0].error.find("corrupt"), std::string::npos);

  Corrupt("control/cluster-secret", "wasmkeep-secret 1\nsecret 00\ncreated_at 1\n");
  EXPECT_EQ(Run(EnsureClusterSecret(store, env)).code(), Code::kFatal);
  EXPECT_EQ(bucket->objects().at("control/cluster-secret").body, "wasmkeep-secret 1\nsecret 00\ncreated_at 1\n")
      << "a corrupt secret is never replaced";
}

TEST_F(ControlTest, RacingAddTokensBothLand) {
  Create("acme");
  // Every request takes 5 ms, so both read the same version and one write conflicts.
  store.set_fault_hook([](const OpInfo&) { return OpFault{milliseconds(5)}; });
  std::optional<Result<NewToken>> a, b;
  for (auto* slot : {&a, &b}) {
    env.Spawn([](ObjectStore* s, Env* e, std::optional<Result<NewToken>>* o) -> Task<void> {
      std::string tenant = "acme";
      o->emplace(co_await AddToken(*s, *e, tenant));
    }(&store, &env, slot), "add");
  }
  world.RunUntilIdle();
  ASSERT_TRUE(a && a->ok() && b && b->ok());
  EXPECT_GE(bucket->counts().precondition_failed, 1u) << "the race happened";
  auto record = Run(ReadTenant(store, "acme"));
  ASSERT_TRUE(record.ok());
  ASSERT_EQ(record->tokens.size(), 3u);
  store.set_fault_hook(nullptr);
  TenantAuth auth(env, store);
  EXPECT_EQ(Auth(auth, "Bearer " + a->value().token).value(), "acme");
  EXPECT_EQ(Auth(auth, "Bearer " + b->value().token).value(), "acme");
}

TEST_F(ControlTest, LostRepliesAreResolvedByReadingBack) {
  // The first put of each call lands but its reply is lost (kUnknownOutcome after the
  // deadline); the call reads back and sees its own write. Puts: 0 create (lost), 1 create
  // again (precondition failed: it is ours), 2 add (lost), 3 revoke (lost).
  int puts = 0;
  store.set_fault_hook([&puts](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut) f.lose_reply = puts++ != 1;
    return f;
  });
  CallOptions call{seconds(1)};
  auto created = Run(CreateTenant(store, env, "acme", call));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto added = Run(AddToken(store, env, "acme", call));
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  ASSERT_TRUE(Run(RevokeToken(store, env, "acme", created->token_id, call)).ok());
  store.set_fault_hook(nullptr);
  auto record = Run(ReadTenant(store, "acme"));
  ASSERT_TRUE(record.ok());
  ASSERT_EQ(record->tokens.size(), 1u) << "no token added twice, the revoked one gone";
  EXPECT_EQ(record->tokens[0].id, added->token_id);
}

TEST_F(ControlTest, ListTenants) {
  Create("beta");
  Create("alpha");
  ASSERT_TRUE(Run(AddToken(store, env, "alpha")).ok());
  auto list = Run(ListTenants(store));
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].tenant, "alpha");
  EXPECT_EQ((*list)[0].record->tokens.size(), 2u);
  EXPECT_EQ((*list)[1].tenant, "beta");
}

TEST_F(ControlTest, ClusterSecretIsCreatedOnceAndShared) {
  auto first = Run(EnsureClusterSecret(store, env));
  ASSERT_TRUE(first.ok());
  // A second node on the same bucket reads the same secret.
  SimEnv env2(world, FromUnixMs(1'764'000'000'000));
  MemStore store2(env2, bucket);
  auto second = RunTask(world, env2, EnsureClusterSecret(store2, env2));
  ASSERT_TRUE(second && second->ok());
  EXPECT_EQ((*second)->bytes, first->bytes);
  EXPECT_EQ(bucket->counts().put, 1u);
  const std::string mac = first->Sign("POST /v1/actors/acme/counter/x");
  EXPECT_EQ(mac.size(), 64u);
  EXPECT_TRUE((*second)->Verify("POST /v1/actors/acme/counter/x", mac));
  EXPECT_FALSE((*second)->Verify("POST /v1/actors/acme/counter/y", mac));
  EXPECT_FALSE((*second)->Verify("POST /v1/actors/acme/counter/x", mac.substr(1)));
}

TEST_F(ControlTest, TwoNodesRacingToCreateTheSecretAgree) {
  SimEnv env2(world, FromUnixMs(1'764'000'000'000));
  MemStore store2(env2, bucket);
  store.set_fault_hook([](const OpInfo&) { return OpFault{milliseconds(3)}; });
  store2.set_fault_hook([](const OpInfo&) { return OpFault{milliseconds(3)}; });
  std::optional<Result<ClusterSecret>> a, b;
  env.Spawn([](ObjectStore* s, Env* e, std::optional<Result<ClusterSecret>>* o) -> Task<void> {
    o->emplace(co_await EnsureClusterSecret(*s, *e));
  }(&store, &env, &a), "a");
  env2.Spawn([](ObjectStore* s, Env* e, std::optional<Result<ClusterSecret>>* o) -> Task<void> {
    o->emplace(co_await EnsureClusterSecret(*s, *e));
  }(&store2, &env2, &b), "b");
  world.RunUntilIdle();
  ASSERT_TRUE(a && a->ok() && b && b->ok());
  EXPECT_EQ(a->value().bytes, b->value().bytes);
  EXPECT_EQ(bucket->counts().precondition_failed, 1u) << "both tried to create it";
}

TEST_F(ControlTest, DeployStoresTheModuleContentAddressedThenThePointer) {
  Create("acme");
  const std::string wasm = std::string("\0asm\1\0\0\0", 8) + "payload";
  auto v = Run(DeployClass(store, env, "acme", "counter", wasm));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->module, ModuleDigest::Of(wasm));
  EXPECT_EQ(v->size_bytes, wasm.size());
  const std::string module_key = "classes/acme/counter/modules/" + v->module.hex;
  EXPECT_EQ(bucket->objects().at(module_key).body, wasm);
  auto current = Run(CurrentClass(store, "acme", "counter"));
  ASSERT_TRUE(current.ok());
  ASSERT_TRUE(current->has_value());
  EXPECT_EQ(**current, *v);
  auto bytes = Run(ReadModule(store, "acme", "counter", v->module));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, wasm);

  // Deploying the same bytes again is fine; another module moves the pointer; the old
  // module stays.
  world.RunFor(seconds(1));
  auto again = Run(DeployClass(store, env, "acme", "counter", wasm));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->module, v->module);
  const std::string wasm2 = wasm + "2";
  auto v2 = Run(DeployClass(store, env, "acme", "counter", wasm2));
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(Run(CurrentClass(store, "acme", "counter")).value()->module, v2->module);
  EXPECT_TRUE(bucket->objects().contains(module_key));

  EXPECT_FALSE(Run(CurrentClass(store, "acme", "other")).value().has_value());
}

TEST_F(ControlTest, DeployRefusesUnknownTenantsAndBadInputWritingNothing) {
  const std::string wasm = "module";
  auto r = Run(DeployClass(store, env, "ghost", "counter", wasm));
  EXPECT_EQ(r.code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("no tenant 'ghost'"), std::string::npos);
  Create("acme");
  auto bad_class = Run(DeployClass(store, env, "acme", "Bad", wasm));
  EXPECT_EQ(bad_class.code(), Code::kInvalidArgument);
  EXPECT_NE(bad_class.status().message().find("class 'Bad'"), std::string::npos);
  EXPECT_EQ(Run(DeployClass(store, env, "acme", "counter", "")).code(), Code::kInvalidArgument);
  for (const auto& [key, obj] : bucket->objects()) EXPECT_FALSE(key.starts_with("classes/")) << key;
}

TEST_F(ControlTest, AModuleWhoseHashDoesNotMatchIsRefusedAndRepairedByTheNextDeploy) {
  Create("acme");
  const std::string wasm = "the module bytes";
  auto v = Run(DeployClass(store, env, "acme", "counter", wasm));
  ASSERT_TRUE(v.ok());
  const std::string key = ModuleKey("acme", "counter", v->module);
  Corrupt(key, "the module bytez");
  auto read = Run(ReadModule(store, "acme", "counter", v->module));
  EXPECT_EQ(read.code(), Code::kFatal);
  EXPECT_NE(read.status().message().find("corrupt module"), std::string::npos);
  EXPECT_EQ(Run(ReadModule(store, "acme", "counter", ModuleDigest{std::string(64, '0')})).code(), Code::kNotFound);
  EXPECT_EQ(Run(ReadModule(store, "acme", "counter", ModuleDigest{"xyz"})).code(), Code::kInvalidArgument);
  // Deploying the same module again finds the bad copy and replaces it.
  ASSERT_TRUE(Run(DeployClass(store, env, "acme", "counter", wasm)).ok());
  EXPECT_EQ(Run(ReadModule(store, "acme", "counter", v->module)).value(), wasm);
  // A corrupt pointer is refused, not read as "never deployed".
  Corrupt(ClassPointerKey("acme", "counter"), "wasmkeep-class 1\n");
  EXPECT_EQ(Run(CurrentClass(store, "acme", "counter")).code(), Code::kFatal);
}

TEST_F(ControlTest, ThePointerIsWrittenOnlyAfterTheModuleIsStored) {
  Create("acme");
  // Module puts fail: nothing points at a module that is not there.
  store.set_fault_hook([](const OpInfo& op) {
    OpFault f;
    if (op.op == StoreOp::kPut && op.key.find("/modules/") != std::string::npos) f.fail_before_apply = Fatal("denied");
    return f;
  });
  EXPECT_EQ(Run(DeployClass(store, env, "acme", "counter", "bytes")).code(), Code::kFatal);
  EXPECT_FALSE(bucket->objects().contains(ClassPointerKey("acme", "counter")));
}

TEST_F(ControlTest, ListClassesOfOneTenantOrAll) {
  Create("acme");
  Create("globex");
  ASSERT_TRUE(Run(DeployClass(store, env, "acme", "counter", "a")).ok());
  ASSERT_TRUE(Run(DeployClass(store, env, "acme", "chat", "b")).ok());
  ASSERT_TRUE(Run(DeployClass(store, env, "globex", "counter", "c")).ok());
  Corrupt(ClassPointerKey("globex", "broken"), "nonsense");
  auto all = Run(ListClasses(store, std::nullopt));
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].tenant + "/" + (*all)[0].class_name, "acme/chat");
  EXPECT_EQ((*all)[3].tenant + "/" + (*all)[3].class_name, "globex/counter");
  EXPECT_FALSE((*all)[2].current.has_value());
  EXPECT_NE((*all)[2].error.find("corrupt"), std::string::npos);
  auto acme = Run(ListClasses(store, std::string("acme")));
  ASSERT_TRUE(acme.ok());
  ASSERT_EQ(acme->size(), 2u);
  EXPECT_EQ((*acme)[1].class_name, "counter");
  EXPECT_EQ((*acme)[1].current->module, ModuleDigest::Of("a"));
  EXPECT_EQ(Run(ListClasses(store, std::string("Bad!"))).code(), Code::kInvalidArgument);
}

TEST_F(ControlTest, TokenLimitPerTenant) {
  Create("acme");
  for (std::size_t i = 1; i < kMaxTokensPerTenant; ++i) ASSERT_TRUE(Run(AddToken(store, env, "acme")).ok()) << i;
  auto over = Run(AddToken(store, env, "acme"));
  EXPECT_EQ(over.code(), Code::kPreconditionFailed);
  EXPECT_NE(over.status().message().find("revoke one first"), std::string::npos);
}

}  // namespace
}  // namespace wk::control
