#!/bin/bash
# bench/bootstrap-streamer.sh — fheplan's bootstrap key streaming against the hand-written
# PyTorch streamer (bench/torch_streamer.py), one card, one process at a time, every
# figure a median: bench/bootstrap --spin 190 (each key use 0.19 ms x batch of GPU time)
# at batch 16 and 1 and budgets of 25, 50 and 100% of the key set under objective bytes,
# objective auto at batch 16, then the streamer on the same key trace (--key-trace).
#   bench/bootstrap-streamer.sh OUTDIR NEW [OLD]
# NEW and OLD: folders holding a bootstrap binary and its lib/ (/work/shared/tools/
# gpu-bundle), e.g. this tree's and a baseline's; OLD's rows are measured beside NEW's.
# Run from the repository root (the plan is plans/ckks-bootstrap.rplan). Each step is
# bounded (timeout); its output is OUTDIR/<step>.txt, the times in info.txt.
set -u
out=$1 new=$2 old=${3:-}
here=$(dirname "$0")
B="--spin 190 --reps 3 --keys 25,50,100 --sequence once"
mkdir -p "$out"
{ date -u; nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current,clocks.sm \
    --format=csv; } > "$out/info.txt" 2>&1
keys=$(mktemp)
LD_LIBRARY_PATH=$new/lib "$new/bootstrap" --key-trace > "$keys"
step() {
    local t=$1 f=$2
    shift 2
    echo "== $(date -u +%T) $f: $*" >> "$out/info.txt"
    timeout "$t" "$@" > "$out/$f" 2>&1
    echo "   rc $? $(date -u +%T)" >> "$out/info.txt"
}
run() { local t=$1 f=$2 d=$3; shift 3; step "$t" "$f" env LD_LIBRARY_PATH="$d/lib" "$d/bootstrap" "$@"; }
run 100 new16.txt "$new" $B --batch 16 --objective bytes
[ -n "$old" ] && run 100 old16.txt "$old" $B --batch 16 --objective bytes
step 110 streamer.txt python3 "$here/torch_streamer.py" --trace "$keys" --spin 190 \
    --reps 5 --json "$out/streamer.json"
run 55 new1.txt "$new" $B --batch 1 --objective bytes
[ -n "$old" ] && run 55 old1.txt "$old" $B --batch 1 --objective bytes
run 45 auto16.txt "$new" $B --batch 16 --objective auto
date -u >> "$out/info.txt"
rm -f "$keys"
