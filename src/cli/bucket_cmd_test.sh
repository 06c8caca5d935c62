#!/usr/bin/env bash
# End-to-end test of `wasmkeep bucket` on a file:// bucket: output, exit codes and
# one-line errors. Usage: bucket_cmd_test.sh PATH/TO/wasmkeep
set -u
wk=${1:?usage: bucket_cmd_test.sh WASMKEEP_BINARY}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bucket="file://$dir/bucket"
passed=0
failed=0

# expect NAME WANT_EXIT [grep pattern on combined output] -- command...
expect() {
  local name=$1 want=$2 pattern=$3
  shift 4
  local out code
  out=$("$@" 2>&1)
  code=$?
  if [ "$code" -ne "$want" ]; then
    echo "FAIL $name: exit $code, wanted $want; output: $out"
    failed=$((failed + 1))
  elif [ -n "$pattern" ] && ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: output does not match /$pattern/: $out"
    failed=$((failed + 1))
  else
    echo "ok   $name"
    passed=$((passed + 1))
  fi
}

printf 'hello' >"$dir/body"
printf 'world' >"$dir/body2"
# Commands that only read never create a bucket: a missing directory is one line naming the
# path, exit 8, and the directory stays missing. Only serve, tenant add and bucket put create
# one, and say so in a log line.
for scheme in file sqlite; do
  missing="$scheme://$dir/typo-$scheme"
  for cmd in "bucket ls" "bucket get nodes/a" "cluster status" "class list" "tenant list" "actor quarantined" "bucket rm k" \
             "cluster fence n" "tenant add-token t" "cluster undrain n"; do
    # shellcheck disable=SC2086
    expect "$scheme: $cmd on a missing bucket" 8 "no bucket there: the directory does not exist" -- "$wk" --bucket "$missing" $cmd
  done
  if [ -e "$dir/typo-$scheme" ]; then echo "FAIL $scheme: a read created $dir/typo-$scheme"; failed=$((failed + 1)); else echo "ok   $scheme: nothing was created"; passed=$((passed + 1)); fi
  out=$("$wk" --bucket "$missing" cluster status 2>&1); lines=$(wc -l <<<"$out")
  if [ "$lines" = 1 ] && grep -q "$dir/typo-$scheme" <<<"$out"; then echo "ok   $scheme: one line naming the path"; passed=$((passed + 1)); else echo "FAIL $scheme: $out"; failed=$((failed + 1)); fi
  mkdir -p "$dir/empty-$scheme"
  expect "$scheme: an empty directory is no bucket" 8 "holds no WasmKeep bucket" -- "$wk" --bucket "$scheme://$dir/empty-$scheme" cluster status
  expect "$scheme: tenant add creates it and says so" 0 "created a new bucket" -- "$wk" --bucket "$missing" tenant add acme
  expect "$scheme: then reads find it" 0 "acme" -- "$wk" --bucket "$missing" tenant list
done
expect "put creates a bucket"  0 "created a new bucket" -- "$wk" --bucket "file://$dir/made-by-put" bucket put k "$dir/body"
expect "put create-only"       0 '^[0-9a-f]+' -- "$wk" --bucket "$bucket" bucket put nodes/a "$dir/body" --if-none-match
expect "put create-only again" 3 'PRECONDITION_FAILED' -- "$wk" --bucket "$bucket" bucket put nodes/a "$dir/body" --if-none-match
v1=$("$wk" --bucket "$bucket" bucket get nodes/a 2>&1 >/dev/null | sed -n 's/^version: //p')
expect "get body"              0 '^hello' -- "$wk" --bucket "$bucket" bucket get nodes/a
expect "if-match current"      0 '' -- "$wk" --bucket "$bucket" bucket put nodes/a "$dir/body2" --if-match "$v1"
expect "if-match stale"        3 'PRECONDITION_FAILED' -- "$wk" --bucket "$bucket" bucket put nodes/a "$dir/body" --if-match "$v1"
expect "stdin put"             0 '' -- bash -c "printf x | '$wk' --bucket '$bucket' bucket put 'odd key/ü' -"
expect "ls"                    0 'odd key/ü' -- "$wk" --bucket "$bucket" bucket ls
expect "ls prefix"             0 '^nodes/a$' -- "$wk" --bucket "$bucket" bucket ls nodes/
expect "ls long"               0 '5  .*nodes/a' -- "$wk" --bucket "$bucket" bucket ls -l nodes/
expect "ls json"               0 '"key": "nodes/a"' -- "$wk" --bucket "$bucket" bucket ls --json
expect "get missing"           4 'NOT_FOUND' -- "$wk" --bucket "$bucket" bucket get nodes/zz
expect "rm"                    0 '' -- "$wk" --bucket "$bucket" bucket rm nodes/a
expect "get after rm"          4 'NOT_FOUND' -- "$wk" --bucket "$bucket" bucket get nodes/a
expect "empty key"             2 'key is empty' -- "$wk" --bucket "$bucket" bucket get ""
expect "long key"              2 'limit is 1024' -- "$wk" --bucket "$bucket" bucket get "$(printf 'k%.0s' $(seq 1 1100))"
expect "unknown scheme"        2 "unknown bucket URL scheme 'ftp'" -- "$wk" --bucket ftp://x bucket ls
expect "s3 without endpoint"   2 'endpoint' -- env -u AWS_ENDPOINT_URL "$wk" --bucket s3://b bucket ls
expect "not a directory"       8 'file:///etc/hostname/b: no bucket there' -- "$wk" --bucket file:///etc/hostname/b bucket ls
expect "unwritable dir"        1 'FATAL.*/etc/hostname/b' -- "$wk" --bucket file:///etc/hostname/b bucket put k "$dir/body"
expect "conflicting flags"     2 '' -- "$wk" --bucket "$bucket" bucket put k "$dir/body" --if-none-match --if-match x
expect "missing file"          2 'cannot read' -- "$wk" --bucket "$bucket" bucket put k "$dir/nope"
expect "unreachable s3"        1 'RETRYABLE' -- env AWS_ACCESS_KEY_ID=a AWS_SECRET_ACCESS_KEY=b "$wk" --timeout 2 --bucket "s3://b?endpoint=http://127.0.0.1:1" bucket put k "$dir/body"
printf '[bucket]\nurl = "%s"\n' "$bucket" >"$dir/good.toml"
printf '[bucket]\nurll = "x"\n' >"$dir/typo.toml"
expect "config file bucket"    0 'odd key' -- "$wk" --config "$dir/good.toml" bucket ls
expect "config typo named"     2 'unknown setting bucket.urll' -- "$wk" --config "$dir/typo.toml" bucket ls
expect "no subcommand"         2 '' -- "$wk" bucket

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
