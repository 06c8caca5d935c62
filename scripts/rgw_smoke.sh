#!/usr/bin/env bash
# scripts/rgw_smoke.sh -- prove that scripts/rgw.sh gives a working S3 server.
#
# Starts a throwaway RGW in a fresh temporary state directory and, signing
# every request with curl's built-in AWS SigV4 signer, checks:
#   - PUT an object, GET it back, bytes are identical
#   - PUT with "If-None-Match: *" on the existing key is refused with 412
#   - GET signed with a wrong secret key is refused with 403
# It also prints INFO lines describing how this RGW treats If-Match (these
# never fail the run; they document server behaviour the client must live
# with).  RGW is stopped on exit whatever happens; the state directory (with
# the daemon logs) is kept only when a check failed.
#
# Prints one PASS/FAIL line per check; exits non-zero if any check failed.

set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RGW=$HERE/rgw.sh

STATE=$(mktemp -d "${TMPDIR:-/tmp}/wasmkeep-rgw-smoke.XXXXXX")
WORK=$STATE.work   # scratch files, kept outside the directory rgw.sh owns
mkdir -p "$WORK"
FAILED=0

cleanup() {
    "$RGW" stop "$STATE" >/dev/null 2>&1
    if ((FAILED)); then
        echo "logs kept in $STATE/log" >&2
    else
        rm -rf "$STATE"
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILED=1; }
info() { echo "INFO: $*"; }

# --- start -------------------------------------------------------------------
t0=$(date +%s%N)
if ! "$RGW" start "$STATE" >"$WORK/start.out"; then
    fail "rgw.sh start"
    exit 1
fi
ms=$((($(date +%s%N) - t0) / 1000000))
pass "rgw.sh start ($((ms / 1000)).$((ms % 1000 / 100))s)"
# shellcheck source=/dev/null
. "$STATE/env"
if "$RGW" status "$STATE" >/dev/null; then pass "rgw.sh status"; else fail "rgw.sh status"; fi

EP=$WASMKEEP_S3_ENDPOINT/$WASMKEEP_S3_BUCKET
EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

# s3 SECRET METHOD KEY PAYLOAD_SHA256 [curl args...]: one signed request.
# Prints the HTTP status; the response body lands in $WORK/body.
# The x-amz-content-sha256 header is mandatory with curl 7.88: curl signs the
# payload hash but does not send it, and RGW assumes UNSIGNED-PAYLOAD when the
# header is absent, so the signatures would never match.
s3() {
    local secret=$1 method=$2 key=$3 sha=$4
    shift 4
    curl -s -o "$WORK/body" -w '%{http_code}' -m 30 \
        --aws-sigv4 "aws:amz:$WASMKEEP_S3_REGION:s3" \
        --user "$AWS_ACCESS_KEY_ID:$secret" \
        -H "x-amz-content-sha256: $sha" \
        -X "$method" "$@" "$EP/$key"
}

# check NAME EXPECTED_STATUS ACTUAL_STATUS
check() {
    if [[ $3 == "$2" ]]; then pass "$1 -> $3"; else fail "$1 -> $3, expected $2 ($(head -c 300 "$WORK/body" 2>/dev/null))"; fi
}

SK=$AWS_SECRET_ACCESS_KEY
KEY=smoke/object-$RANDOM
head -c 100000 /dev/urandom >"$WORK/data"
DATA_SHA=$(sha256sum "$WORK/data" | cut -d' ' -f1)
PUT_DATA=(--data-binary "@$WORK/data" -H 'Content-Type: application/octet-stream')

# --- required checks -------------------------------------------------------
check "PUT $KEY" 200 "$(s3 "$SK" PUT "$KEY" "$DATA_SHA" "${PUT_DATA[@]}" -D "$WORK/put.headers")"
ETAG=$(sed -n 's/^[Ee][Tt][Aa][Gg]: *"\{0,1\}\([^"]*\)"\{0,1\}\r\{0,1\}$/\1/p' "$WORK/put.headers")

code=$(s3 "$SK" GET "$KEY" "$EMPTY_SHA256")
if [[ $code == 200 ]] && cmp -s "$WORK/data" "$WORK/body"; then
    pass "GET $KEY -> 200, identical bytes"
else
    fail "GET $KEY -> $code, bodies $(cmp -s "$WORK/data" "$WORK/body" && echo equal || echo differ)"
fi

check "PUT If-None-Match: * on existing key" 412 \
    "$(s3 "$SK" PUT "$KEY" "$DATA_SHA" "${PUT_DATA[@]}" -H 'If-None-Match: *')"

check "GET with wrong secret key" 403 "$(s3 "wrong-$SK" GET "$KEY" "$EMPTY_SHA256")"

# --- informational: conditional writes on this RGW ---------------------------
info "ETag of $KEY is \"$ETAG\""
info "PUT If-None-Match: * on new key -> $(s3 "$SK" PUT "$KEY-new" "$DATA_SHA" "${PUT_DATA[@]}" -H 'If-None-Match: *')"
info "PUT If-Match: \"<etag>\" (quoted, matching) -> $(s3 "$SK" PUT "$KEY" "$DATA_SHA" "${PUT_DATA[@]}" -H "If-Match: \"$ETAG\"")"
info "PUT If-Match: <etag> (unquoted, matching) -> $(s3 "$SK" PUT "$KEY" "$DATA_SHA" "${PUT_DATA[@]}" -H "If-Match: $ETAG")"
info "PUT If-Match: <other etag> (unquoted) -> $(s3 "$SK" PUT "$KEY" "$DATA_SHA" "${PUT_DATA[@]}" -H "If-Match: 0123456789abcdef0123456789abcdef")"
info "PUT If-Match: <etag> on missing key -> $(s3 "$SK" PUT "$KEY-missing" "$DATA_SHA" "${PUT_DATA[@]}" -H "If-Match: $ETAG")," \
    "key then: $(s3 "$SK" HEAD "$KEY-missing" "$EMPTY_SHA256" -I)"
info "GET If-Match: \"<etag>\" (quoted) -> $(s3 "$SK" GET "$KEY" "$EMPTY_SHA256" -H "If-Match: \"$ETAG\"")"

# --- stop --------------------------------------------------------------------
if "$RGW" stop "$STATE" >/dev/null 2>&1 && ! "$RGW" status "$STATE" >/dev/null; then
    pass "rgw.sh stop"
else
    fail "rgw.sh stop"
fi

if ((FAILED)); then
    echo "SMOKE FAILED"
    exit 1
fi
echo "SMOKE PASSED"
