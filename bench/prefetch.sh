#!/bin/sh
# bench/prefetch.sh — how close prefetching runs of the bootstrap plan come to Belady's
# MIN (`make bench-prefetch`). MIN is what `fheplan check` reports for the lookahead
# policy (tests/unit/test_lookahead_cli.c checks it against its own simulator); each run
# prints bytes moved / MIN, a ratio that depends on when bodies complete, so it is
# measured here and never asserted by a test. Runs on the emulated device by default.
#
# Usage: bench/prefetch.sh [BUILD] [DEVICE] [RUNS]   (build, emu, 5)
set -eu
build=${1:-build}
dev=${2:-emu}
runs=${3:-5}
fp=$build/fheplan
jq=$build/jsonq
plan=plans/ckks-bootstrap.rplan
scale=256
min=$("$fp" check --json "$plan" | "$jq" '.files[0].bytes_moved')
echo "prefetch: MIN moves $min bytes (unscaled); $runs runs per mode on $dev, --scale $scale"
for mode in "--prefetch 0" "--prefetch 1" "" "--policy tiered_lru"; do
    r=1
    while [ "$r" -le "$runs" ]; do
        moved=$("$fp" run --json --device "$dev" --scale $scale $mode "$plan" |
                "$jq" '.totals.bytes_moved')
        awk -v m="$moved" -v s=$scale -v min="$min" -v mode="${mode:-default}" -v r="$r" \
            'BEGIN { printf "  %-20s run %d: bytes moved / MIN = %.4f\n", mode, r, m * s / min }'
        r=$((r + 1))
    done
done
