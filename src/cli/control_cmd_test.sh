#!/usr/bin/env bash
# `wasmkeep tenant ...`, `deploy` and `class list` against a file:// bucket: tokens printed
# last and stored only as hashes, duplicates and bad names refused with their exit codes,
# modules checked before they are stored content-addressed, the class pointer after them.
set -uo pipefail
wk=$1
actors=$2
failures=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export WASMKEEP_BUCKET="file://$tmp/bucket"
mkdir -p "$tmp/bucket"

check() {  # check NAME EXPECTED_EXIT EXPECTED_TEXT ARGS...
  local name=$1 want_rc=$2 want_text=$3
  shift 3
  local rc
  out=$("$wk" "$@" 2>&1)
  rc=$?
  if [ "$rc" != "$want_rc" ] || ! grep -qF -- "$want_text" <<<"$out"; then
    echo "FAIL $name: exit $rc (want $want_rc, text '$want_text'), output:"
    echo "$out"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}
expect() {  # expect NAME CONDITION_EXIT_STATUS
  if [ "$2" = 0 ]; then echo "ok   $1"; else echo "FAIL $1"; failures=$((failures + 1)); fi
}
token_re='^wk\.acme\.[0-9a-f]{16}\.[0-9a-f]{64}$'

# Tenants and tokens.
check "tenant add" 0 "created tenant acme" tenant add acme
token1=$(tail -n 1 <<<"$out")
grep -qE "$token_re" <<<"$token1"; expect "the token is the last line" $?
id1=$(cut -d. -f3 <<<"$token1")
secret1=$(cut -d. -f4 <<<"$token1")
check "duplicate tenant" 3 "tenant 'acme' already exists" tenant add acme
check "bad tenant name" 2 "tenant 'Acme' must be 1-63 of a-z" tenant add Acme
check "bad tenant name (dot)" 2 "tenant 'a.b'" tenant add a.b
check "add-token" 0 "token id" tenant add-token acme
token2=$(tail -n 1 <<<"$out")
grep -qE "$token_re" <<<"$token2"; expect "add-token prints the token last" $?
[ "$token1" != "$token2" ]; expect "tokens differ" $?
id2=$(cut -d. -f3 <<<"$token2")
check "add-token unknown tenant" 4 "no tenant 'ghost'" tenant add-token ghost
check "tenant list" 0 "$id1 $id2" tenant list
check "tenant list --json" 0 "\"id\": \"$id2\"" tenant list --json
body=$("$wk" bucket get control/tenants/acme 2>/dev/null)
grep -q "^wasmkeep-tenant 1$" <<<"$body"; expect "tenant record format" $?
! grep -q "$secret1" <<<"$body"; expect "only the hash is stored" $?
hash1=$(printf '%s' "$secret1" | sha256sum | cut -d' ' -f1)
grep -q "^token $id1 $hash1 " <<<"$body"; expect "the stored hash is the secret's SHA-256" $?
check "revoke-token" 0 "revoked token $id1 of tenant acme" tenant revoke-token acme "$id1"
check "revoke again" 4 "tenant 'acme' has no token '$id1'" tenant revoke-token acme "$id1"
check "revoke bad id" 2 "token id 'zz' must be 16 lowercase hex" tenant revoke-token acme zz
check "revoke unknown tenant" 4 "no tenant 'ghost'" tenant revoke-token ghost "$id2"
check "revoke needs an id" 2 "token_id is required" tenant revoke-token acme
check "list after revoke" 0 "$id2" tenant list
grep -q "$id1" <<<"$out" && { echo "FAIL revoked id still listed"; failures=$((failures + 1)); }

# Quotas (docs/tenants.md, "Quotas"): checked before anything is written, naming the quota.
check "quotas: none set" 0 "requests_per_second    unlimited" tenant quotas acme
check "quota set" 0 "requests_per_second    50" tenant set acme --quota requests_per_second=50 --quota module_bytes=1MiB
check "quota shown" 0 "module_bytes           1048576" tenant quotas acme
check "quota --json" 0 '"requests_per_second": 50' tenant quotas acme --json
check "quota unknown name" 2 "unknown quota 'rps'" tenant set acme --quota rps=5
check "quota bad value" 2 "requests_per_second: '0' is not a positive integer" tenant set acme --quota requests_per_second=0
check "quota not NAME=VALUE" 2 "is not NAME=VALUE" tenant set acme --quota requests_per_second
check "quota unknown tenant" 4 "no tenant 'ghost'" tenant set ghost --quota requests_per_second=5
check "quota record format" 0 "quota requests_per_second 50" bucket get control/quotas/acme
check "quota removed" 0 "requests_per_second    unlimited" tenant set acme --quota requests_per_second=unlimited
check "module_bytes small" 0 "module_bytes           1024" tenant set acme --quota module_bytes=1KiB
check "deploy over module_bytes" 2 "tenant acme is over its quota module_bytes=1024" \
  deploy --tenant acme --class counter "$actors/counter.wasm"
[ -z "$("$wk" bucket ls classes/acme/ 2>&1)" ]; expect "nothing stored past the quota" $?
check "module_bytes removed" 0 "module_bytes           unlimited" tenant set acme --quota module_bytes=unlimited

# Deploy.
check "deploy counter" 0 "deployed acme/counter version 1: module sha256" deploy --tenant acme --class counter "$actors/counter.wasm"
sha=$(sha256sum "$actors/counter.wasm" | cut -d' ' -f1)
grep -qF "$sha" <<<"$out"; expect "deploy names the module's sha256" $?
check "module stored content-addressed" 0 "classes/acme/counter/modules/$sha" bucket ls classes/acme/counter/
check "pointer stored" 0 "module $sha" bucket get classes/acme/counter/current
check "deploy again (same module): the same version" 0 "deployed acme/counter version 1:" deploy --tenant acme --class counter "$actors/counter.wasm"
check "deploy --json" 0 "\"module_sha256\": \"$(sha256sum "$actors/chat.wasm" | cut -d' ' -f1)\"" \
  deploy --tenant acme --class chat --json "$actors/chat.wasm"
echo "not wasm" >"$tmp/x.wasm"
check "deploy refuses non-wasm" 2 "x.wasm: not a WebAssembly module" deploy --tenant acme --class bad "$tmp/x.wasm"
check "deploy refuses a bad ABI" 2 'does not export the function "wk_on_request"' \
  deploy --tenant acme --class bad "$actors/no_handler.wasm"
check "nothing stored for refused modules" 0 "" bucket ls classes/acme/bad/
[ -z "$out" ]; expect "no classes/acme/bad objects" $?
check "deploy names a host call this release lacks" 2 "imports the function wasmkeep_v1.no_such_function, which the host does not provide" \
  deploy --tenant acme --class bad "$actors/bad_import.wasm"
check "deploy unknown tenant" 4 "no tenant 'ghost' (create it with \`wasmkeep tenant add ghost\`)" \
  deploy --tenant ghost --class counter "$actors/counter.wasm"
check "deploy bad class name" 2 "class 'Counter' must be 1-63" deploy --tenant acme --class Counter "$actors/counter.wasm"
check "deploy bad tenant name" 2 "tenant 'ACME'" deploy --tenant ACME --class counter "$actors/counter.wasm"
check "deploy missing file" 2 "cannot read" deploy --tenant acme --class counter "$tmp/none.wasm"
check "deploy needs --tenant" 2 "--tenant is required" deploy --class counter "$actors/counter.wasm"
printf '[actors]\nmax_memory_bytes = 65536\nmemory_budget_bytes = 65536\nmax_stored_bytes = 200000\n' >"$tmp/small.toml"
check "deploy applies the [actors] limits" 2 "over the limit of 65536 bytes per actor" \
  --config "$tmp/small.toml" deploy --tenant acme --class counter "$actors/counter.wasm"

# Class list.
check "class list" 0 "$sha" class list
grep -q "^acme  *chat " <<<"$out"; expect "class list shows chat" $?
"$wk" tenant add globex >/dev/null 2>&1
check "deploy for another tenant" 0 "deployed globex/kv" deploy --tenant globex --class kv "$actors/kv.wasm"
check "class list --tenant" 0 "counter" class list --tenant acme
grep -q globex <<<"$out" && { echo "FAIL class list --tenant acme shows globex"; failures=$((failures + 1)); }
check "class list --json" 0 '"class": "kv"' class list --json
check "class list bad tenant" 2 "tenant 'Bad'" class list --tenant Bad
check "class list empty tenant" 0 "(no classes deployed)" class list --tenant nobody

# Versions and the rollout (docs/tenants.md, "Deploying").
check "deploy a second version to 10 %" 0 "rolled out to 10% of the actors (version 1 stays" \
  deploy --tenant acme --class counter --rollout 10 --by ops@ci "$actors/upgrade_v2.wasm"
grep -q "it exports wk_on_upgrade" <<<"$out"; expect "deploy says the version migrates state" $?
check "deploy --rollout 101" 2 "--rollout 101 is not a percentage" deploy --tenant acme --class counter --rollout 101 "$actors/counter.wasm"
check "deploy --by refused" 2 "--by: deployed_by 'a b'" deploy --tenant acme --class counter --by "a b" "$actors/counter.wasm"
check "class versions" 0 "stable 1, candidate 2 at 10%" class versions acme/counter
grep -qE "^2 +[0-9T:Z-]+ +ops@ci +yes " <<<"$out"; expect "class versions shows who, and that 2 migrates" $?
check "class versions --json" 0 '"migrates": true' class versions acme/counter --json
check "class rollout raises the share" 0 "candidate 2 at 50%" class rollout acme/counter 2 50
check "class rollout --pin" 0 "pinned: alice runs version 1" class rollout acme/counter --pin acme/counter/alice=1
check "class rollout --pin of another class" 2 "not an actor of acme/counter" class rollout acme/counter --pin acme/chat/bob=1
check "class rollout unknown version" 4 "has no version 7" class rollout acme/counter 7 10
check "class rollout bad percent" 2 "PERCENT 150 is over 100" class rollout acme/counter 2 150
check "class rollout nothing to do" 2 "nothing to change" class rollout acme/counter
check "class rollout bad class" 2 "expected TENANT/CLASS" class rollout acme 2 10
check "class broken refuses the stable version" 2 "version 1 is stable" class broken acme/counter 1
check "class pause" 0 "PAUSED: looking at errors" class pause acme/counter --reason "looking at errors"
check "class rollout to 100 makes it stable" 0 "acme/counter: stable 2 " class rollout acme/counter 2 100
grep -q PAUSED <<<"$out" && { echo "FAIL a new share did not resume the rollout"; failures=$((failures + 1)); }
check "class list shows the stable version" 0 "$(sha256sum "$actors/upgrade_v2.wasm" | cut -d' ' -f1)" class list --tenant acme
check "class rollout back to 1 (a rollback)" 0 "acme/counter: stable 1 " class rollout acme/counter 1 100
check "class broken marks" 0 "broken: version 2 (its actors run version 1" class broken acme/counter 2
check "class rollout refuses a broken version" 2 "is marked broken" class rollout acme/counter 2 10
check "class broken needs a version" 2 "version is required" class broken acme/counter
check "class broken of an unknown version" 4 "no version 9" class broken acme/counter 9
check "a broken module deployed again is refused" 2 "marked broken: clear it" deploy --tenant acme --class counter "$actors/upgrade_v2.wasm"
check "class versions of a class never deployed" 4 "no class acme/nothing" class versions acme/nothing

# Corrupt objects are reported, never read as empty.
printf 'garbage\n' | "$wk" bucket put control/tenants/broken - >/dev/null 2>&1
check "corrupt tenant listed" 0 "ERROR: corrupt wasmkeep-tenant 1 record" tenant list
check "add-token on a corrupt tenant" 1 "corrupt wasmkeep-tenant 1 record" tenant add-token broken

if [ "$failures" -gt 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all tenant, deploy and class tests passed"
