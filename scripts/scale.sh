#!/usr/bin/env bash
# The cluster protocol past one machine, by simulation (docs/scaling.md): runs the
# simulator's scale mode (wasmkeep-sim --nodes N: sim/scale.h) at 10, 100 and 1,000 nodes
# and at the sizes between that find where it breaks, and prints one table.
#
#   scripts/scale.sh                 # lease scenario: 10 100 200 300 350 400 500 1000 nodes
#   scripts/scale.sh 10 100          # only these sizes
#   SCENARIO=ownership scripts/scale.sh 10 100 300   # with actors (2 a node) acquired and released
#   SEED=2 WASMKEEP_SIM=build/release/sim/wasmkeep-sim scripts/scale.sh
#
# WASMKEEP_SIM: the binary (default: build/release's if built, else build/ci's). Each size
# prints its full report into $OUT (default /tmp/wasmkeep-scale), one file a size. A
# 1,000-node run takes minutes on the sanitizer build (its window is 40 s of virtual time).
set -euo pipefail
cd "$(dirname "$0")/.."

SIM="${WASMKEEP_SIM:-}"
if [[ -z "$SIM" ]]; then
  for candidate in build/release/sim/wasmkeep-sim build/ci/sim/wasmkeep-sim build/debug/sim/wasmkeep-sim; do
    if [[ -x "$candidate" ]]; then SIM="$candidate"; break; fi
  done
fi
[[ -n "$SIM" && -x "$SIM" ]] || { echo "scale.sh: no wasmkeep-sim built (set WASMKEEP_SIM)" >&2; exit 2; }
SCENARIO="${SCENARIO:-lease}"
SEED="${SEED:-1}"
OUT="${OUT:-/tmp/wasmkeep-scale}"
mkdir -p "$OUT"
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(10 100 200 300 350 400 500 1000)

rows=()
for n in "${sizes[@]}"; do
  report="$OUT/$SCENARIO-$n.txt"
  start=$(date +%s)
  # Exit status: safety checkers (1-6, 8-10). Liveness is a line of the report here.
  if ! "$SIM" --scenario "$SCENARIO" --nodes "$n" --first-seed "$SEED" --seeds 1 --quiet >"$report" 2>&1; then
    echo "scale.sh: $n nodes: a safety checker failed (see $report)" >&2
    grep -E "violation|FAILED" "$report" >&2 || true
    exit 1
  fi
  row=$(grep '^scale-row ' "$report" || true)
  [[ -n "$row" ]] || { echo "scale.sh: $n nodes: no report (see $report)" >&2; exit 1; }
  rows+=("$row took_s=$(( $(date +%s) - start ))")
  echo "  $n nodes done in $(( $(date +%s) - start )) s: $report" >&2
done

field() {  # field NAME ROW
  local name="$1" row="$2"
  sed -n "s/.* $name=\([^ ]*\).*/\1/p" <<<" $row"
}

echo "scenario $SCENARIO, seed $SEED, $SIM"
printf '%6s %9s %8s %9s %7s %7s %9s %10s %8s %9s %8s %6s %9s %s\n' \
  nodes "req/s" "lease/s" "listing/s" "fence/s" "owner/s" '$/day' "fence(s)" "taken(s)" "listing(s)" \
  "lst.fail" lapses "503s" "first limit hit"
for row in "${rows[@]}"; do
  printf '%6s %9s %8s %9s %7s %7s %9s %10s %8s %9s %8s %6s %9s %s\n' \
    "$(field nodes "$row")" "$(field req_s "$row")" "$(field lease_s "$row")" "$(field listing_s "$row")" \
    "$(field fence_s "$row")" "$(field owner_s "$row")" "$(field dollars_day "$row")" \
    "$(field fence_after_s "$row")" "$(field taken_after_s "$row")" "$(field listing_s_mean "$row")" \
    "$(field listing_fail "$row")" "$(field lapses "$row")" "$(field refused_503 "$row")" \
    "$(field first_limit "$row" | tr '_' ' ')"
done
echo "(req/s and \$/day: the measured window; fence(s): kill to fence, mean of the kills; taken(s): kill to the last"
echo " of its actors acquired by another node; listing(s): mean listing time; 503s: in the window / the run)"
