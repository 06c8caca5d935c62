#!/usr/bin/env bash
# TLS between nodes with real `wasmkeep serve` processes on 127.0.0.1 (docs/security.md,
# "Between nodes"): each node record publishes the pin of the node's key; forwarding
# between three nodes goes over TLS; the peer receives neither the client's token nor
# anything unsigned; a captured forwarded request re-sent is refused; the peer listener
# refuses a key no live record names; after a fence, the fenced node's key is refused at
# the next listing; the client API over TLS from certificate files.
#
#   peer_tls_test.sh WASMKEEP_BINARY ACTORS_DIR
#
# Test hooks (serve_cmd.cc): WASMKEEP_DEBUG_PEER_KEY_FILE gives each node a key this script
# made (so it can present a node's identity itself: nodes never write their keys);
# WASMKEEP_DEBUG_CAPTURE_FORWARDED writes what each node's peer listener receives.
set -u
wk=${1:?usage: peer_tls_test.sh WASMKEEP_BINARY ACTORS_DIR}
actors=${2:?usage: peer_tls_test.sh WASMKEEP_BINARY ACTORS_DIR}
backend=file
prefix=peertls
# shellcheck source=common.sh
source "$(dirname "$0")/common.sh"

# ---- keys: a, b, c are the nodes', x is nobody's
for k in a b c x; do
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/$k.key" 2>/dev/null
  openssl req -x509 -new -key "$work/$k.key" -subj "/CN=$k" -days 1 -out "$work/$k.crt" 2>/dev/null
done
pin_of() { openssl pkey -in "$work/$1.key" -pubout -outform DER 2>/dev/null | sha256sum | cut -d' ' -f1; }
pin64_of() { openssl pkey -in "$work/$1.key" -pubout -outform DER 2>/dev/null | openssl dgst -sha256 -binary | base64; }
field_of() { W bucket get "nodes/$1" 2>/dev/null | awk -v f="$2" '$1==f {print $2}'; }
# Node a listens on port_of 1, b on 2, c on 3.
idx_of() { echo $(( $(printf '%d' "'$1") - 96 )); }

TOKEN=$(tenant_add acme)
W deploy --tenant acme --class counter "$actors/counter.wasm" >/dev/null 2>&1

# req, status and until_ok: common.sh.
# peer NODE KEY [curl args...]: a request to NODE's peer listener presenting KEY's
# certificate (none if KEY is "-"), checking NODE's own pin; prints the HTTP status (000:
# no answer, the TLS handshake refused) and saves the reply's headers in $work/peer.h.
peer() {
  local node=$1 key=$2
  shift 2
  local cert=()
  [ "$key" != - ] && cert=(--cert "$work/$key.crt" --key "$work/$key.key")
  curl -s -m 10 --http1.1 -k --pinnedpubkey "sha256//$(pin64_of "$node")" "${cert[@]}" -o "$work/peer.body" \
    -D "$work/peer.h" -w '%{http_code}' "$@"
}

mkdir -p "$work/cap_a" "$work/cap_b" "$work/cap_c"
for n in a b c; do
  start "$n" "$n" "$(idx_of "$n")" WASMKEEP_DEBUG_PEER_KEY_FILE="$work/$n.key" WASMKEEP_DEBUG_CAPTURE_FORWARDED="$work/cap_$n"
done
# A fourth node serves its client API over TLS from certificate files.
openssl req -x509 -new -key "$work/x.key" -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" -days 1 \
  -out "$work/api.crt" 2>/dev/null
cp "$work/fast.toml" "$work/tls.toml"
printf '[node]\ntls_cert_file = "%s"\ntls_key_file = "%s"\n' "$work/api.crt" "$work/x.key" >>"$work/tls.toml"
"$wk" --config "$work/tls.toml" --bucket "$bucket" serve --node-id d --listen "127.0.0.1:$(port_of 4)" \
  >"$work/d.out" 2>"$work/d.log" &
pid_d=$!
pids+=("$pid_d")
wait_ready_tls() {
  wait_for "$2" "curl -sf --cacert '$work/api.crt' 'https://127.0.0.1:$(port_of "$1")/readyz' >/dev/null 2>&1"
}

echo "== TLS between nodes"
check "four nodes ready (d's client API over TLS)" 'wait_ready 1 20 && wait_ready 2 20 && wait_ready 3 20 && wait_ready_tls 4 20'
for n in a b c d; do kill -0 "$(eval echo "\$pid_$n")" 2>/dev/null || { echo "     (node $n exited; its log:)"; tail -5 "$work/$n.log"; }; done
check "each node record publishes the pin of the node's key" \
  '[ "$(field_of a cert_pin)" = "$(pin_of a)" ] && [ "$(field_of b cert_pin)" = "$(pin_of b)" ] && [ "$(field_of c cert_pin)" = "$(pin_of c)" ]'
dpin=$(field_of d cert_pin)
check "a node without a test key publishes a fresh pin of its own" '[[ "$dpin" =~ ^[0-9a-f]{64}$ ]] && [ "$dpin" != "$(pin_of x)" ]'
check "the node record's address is the peer listener, not the client API" \
  '[ -n "$(field_of a address)" ] && [ "$(field_of a address)" != "127.0.0.1:$(port_of 1)" ]'

# ---- forwarding over TLS: any node reaches the one owner
check "9 increments through a, b and c count 1..9 at one owner" 'increments_in_turn 3 1 2 3'
r=$(curl -s -m 20 --cacert "$work/api.crt" -X POST -H "Authorization: Bearer $TOKEN" \
  "https://127.0.0.1:$(port_of 4)/v1/actors/acme/counter/shared/increment")
check "through d's TLS client API too: 10" '[ "$r" = 10 ]'
r=$("$wk" --config "$work/tls.toml" --bucket "$bucket" call --token "$TOKEN" --node "127.0.0.1:$(port_of 4)" \
  -X POST acme/counter/other/increment 2>&1)
check "wasmkeep call with the TLS config reaches d over https: 1" '[ "$r" = 1 ]'
check "d's client API does not speak plain HTTP" '! curl -sf -m 5 "http://127.0.0.1:$(port_of 4)/readyz" >/dev/null 2>&1'
owner=$(W bucket get owners/acme/counter/shared 2>/dev/null | awk '/^owner /{print $2}')
echo "     (owner: $owner)"
case "$owner" in a | b | c) ;; *) echo "FAIL the owner should be a, b or c, not '$owner'"; finish; exit 1 ;; esac
captured=$(ls "$work/cap_$owner" | wc -l)
check "the owner's peer listener received the 7 forwarded requests (and any retried)" '[ "$captured" -ge 7 ]'
check "the peer never receives the client's Authorization header or its token" \
  '! grep -qi "^authorization:" "$work/cap_$owner"/*.http && ! grep -qF "${TOKEN##*.}" "$work/cap_$owner"/*.http'
check "each forwarded request carries a nonce and a signature" \
  '[ "$(grep -li "^x-wasmkeep-nonce: [0-9a-f]\{32\}$" "$work/cap_$owner"/*.http | wc -l)" = "$captured" ] &&
   [ "$(grep -li "^x-wasmkeep-signature: " "$work/cap_$owner"/*.http | wc -l)" = "$captured" ]'

# ---- a captured forwarded request, re-sent over TLS with its sender's own key
# (The newest one a, b or c sent: the script holds their keys, not d's.)
sender_of() { awk -F': ' '/^$/ {exit} tolower($1)=="x-wasmkeep-forwarded-by" {print $2}' "$1"; }
last=""
for f in $(ls -v "$work/cap_$owner"/*.http); do case "$(sender_of "$f")" in a | b | c) last=$f ;; esac; done
read -r method target < <(head -n1 "$last")
blank=$(grep -n '^$' "$last" | head -n1 | cut -d: -f1)
sender=$(sender_of "$last")
tail -n +$((blank + 1)) "$last" >"$work/replay.body"
replay=()
while IFS= read -r line; do
  case "$(tr 'A-Z' 'a-z' <<<"${line%%:*}")" in host | content-length) continue ;; esac
  replay+=(-H "$line")
done < <(sed -n "2,$((blank - 1))p" "$last")
owner_peer=$(field_of "$owner" address)
before=$(req "$(idx_of "$owner")" GET acme/counter/shared)
code=$(peer "$owner" "$sender" -X "$method" "${replay[@]}" --data-binary @"$work/replay.body" "https://$owner_peer$target")
cp "$work/peer.h" "$work/replay.h"
echo "     (replayed $(basename "$last") from $sender: $code $(grep -i '^x-wasmkeep-forwarding-refused' "$work/replay.h" | tr -d '\r'))"
check "a replayed forwarded request is refused: 401 naming the replay" \
  '[ "$code" = 401 ] && grep -qi "^x-wasmkeep-forwarding-refused: replayed" "$work/replay.h"'
check "...and did not run: the count is unchanged ($before)" \
  '[ "$before" = "200 10" ] && [ "$(req "$(idx_of "$owner")" GET acme/counter/shared)" = "$before" ]'
code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -X "$method" "${replay[@]}" --data-binary @"$work/replay.body" \
  "http://127.0.0.1:$(port_of "$(idx_of "$owner")")$target")
check "the client API refuses a forwarded request: 401" '[ "$code" = 401 ]'

# ---- the peer listener's handshake
other=$( [ "$owner" = a ] && echo b || echo a )
check "a live node's key passes the handshake (an unsigned request is then refused: 401)" \
  '[ "$(peer "$owner" "$other" "https://$owner_peer/v1/actors/acme/counter/shared")" = 401 ]'
check "a key no live node record names is refused at the handshake" \
  '[ "$(peer "$owner" x "https://$owner_peer/v1/actors/acme/counter/shared")" = 000 ]'
check "no client certificate: refused at the handshake" \
  '[ "$(peer "$owner" - "https://$owner_peer/v1/actors/acme/counter/shared")" = 000 ]'

# ---- a request signed for one node but sent with another node's key
# Signed here with the cluster secret from the bucket (the text: src/routing/forwarder.h),
# which also checks that format from outside.
third=$(for n in a b c; do [ "$n" != "$owner" ] && [ "$n" != "$other" ] && echo "$n"; done)
secret=$(W bucket get control/cluster-secret 2>/dev/null | awk '$1=="secret" {print $2}')
owner_instance=$(W bucket get "nodes/$owner" 2>/dev/null | awk '$1=="lease" {print $3}')
forge() {  # forge FROM: curl arguments for a fresh increment signed as FROM
  local from=$1 ts nonce sig
  ts=$(date +%s%3N)
  nonce=$(openssl rand -hex 16)
  sig=$(printf 'wasmkeep-forward 2\n%s\n%s\n%s\nPOST\n/v1/actors/acme/counter/shared/increment\nacme\n1\n%s\n%s\n%s\n\n' \
    "$from" "$owner" "$owner_instance" "$ts" "$nonce" "$(printf '' | sha256sum | cut -d' ' -f1)" |
    openssl dgst -sha256 -mac HMAC -macopt "hexkey:$secret" | awk '{print $NF}')
  forged=(-X POST -H "X-Wasmkeep-Forwarded-By: $from" -H "X-Wasmkeep-Forwarded-To: $owner $owner_instance"
    -H "X-Wasmkeep-Tenant: acme" -H "X-Wasmkeep-Hops: 1" -H "X-Wasmkeep-Timestamp: $ts" -H "X-Wasmkeep-Nonce: $nonce"
    -H "X-Wasmkeep-Signed-Headers;" -H "X-Wasmkeep-Signature: $sig" "https://$owner_peer/v1/actors/acme/counter/shared/increment")
}
forge "$third"
code=$(peer "$owner" "$other" "${forged[@]}")
check "signed as $third but sent with $other's key: 401, the certificate is not $third's" \
  '[ "$code" = 401 ] && grep -qi "^x-wasmkeep-forwarding-refused: the TLS certificate is not" "$work/peer.h"'
forge "$third"
code=$(peer "$owner" "$third" "${forged[@]}")
check "the same, sent with $third's own key: 200 (the signature made here is right): 11" \
  '[ "$code" = 200 ] && [ "$(cat "$work/peer.body")" = 11 ]'

# ---- a fence: the fenced node's pin is refused from the next listing on
trusted() { metric "$(idx_of "$owner")" wasmkeep_peer_pins_trusted; }
check "the owner trusts the pins of its 3 live peers" '[ "$(trusted)" = 3 ]'
W cluster fence "$other" >/dev/null 2>&1
fenced_at=$SECONDS
check "after cluster fence $other, the owner's next listing drops its pin" 'wait_for 5 "[ \"\$(trusted)\" = 2 ]"'
check "...and $other's key is refused at the handshake" \
  '[ "$(peer "$owner" "$other" "https://$owner_peer/v1/actors/acme/counter/shared")" = 000 ]'
echo "     (refused $((SECONDS - fenced_at)) s after the fence; listing period 0.6 s)"
check "the fenced process exits" 'wait_exit "$(eval echo "\$pid_$other")" 10; [ "$code" != 124 ]'
r=$(until_ok 10 "$(idx_of "$third")" POST acme/counter/shared/increment)
check "forwarding from the third node still works: 12" '[ "$r" = "200 12" ]'

finish
