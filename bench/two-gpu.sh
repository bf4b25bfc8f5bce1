#!/bin/sh
# bench/two-gpu.sh — the two-GPU measurements of one host (`make bench-two-gpu`): the
# peer link beside the pinned host link and both GPUs loading at once (bench/transfer
# --two-gpu), the two-GPU bootstrap under one manager (keys shared over the peer link),
# and two independent MPI ranks of the one-GPU bootstrap on the same keys, each with its
# time and PCIe bytes, with the rows that tell why two ranks scale below 2x: host memory
# bandwidth (host memcpy by threads), a shared PCIe switch (two devices at once against
# one), or neither (then the ranks' own overheads).
#
# Usage: bench/two-gpu.sh [--emu] [BUILD]   (BUILD defaults to build)
#   --emu  the plan and MPI parts on the emulated device (emu:2; no transfer rows): a
#          rehearsal of the script on a host without GPUs. Exit 77: fewer than two GPUs.
set -eu
emu=0
if [ "${1:-}" = "--emu" ]; then
    emu=1
    shift
fi
build=${1:-build}
fp=$build/fheplan
jq=$build/jsonq
xfer=$build/bench/transfer
one=plans/ckks-bootstrap.rplan
two=plans/ckks-bootstrap-2gpu.rplan
# the command and the JSON reader it needs are built here when missing (run from the
# repository root, as the plan paths below are)
for f in "$fp" "$jq"; do
    [ -x "$f" ] && continue
    echo "two-gpu: building $f" >&2
    make --no-print-directory BUILD="$build" "$f" >&2 || { echo "two-gpu: cannot build $f" >&2; exit 2; }
done

if [ "$emu" = 1 ]; then
    dev=emu:2
    mpidev=emu
    scale=64
    run_scale="--scale $scale"
else
    ngpu=0
    if command -v nvidia-smi >/dev/null 2>&1; then
        ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
    fi
    if [ "$ngpu" -lt 2 ]; then
        echo "two-gpu: skipped: $ngpu GPU(s) visible; these measurements need two GPUs of" \
             "one host (bench/two-gpu.sh --emu rehearses the script on the emulated device)" >&2
        exit 77
    fi
    [ -x "$xfer" ] || { echo "two-gpu: $xfer is missing (make bench-transfer)" >&2; exit 2; }
    dev=cuda
    mpidev=cuda
    scale=1
    run_scale=""
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
q() { "$jq" "$2" < "$1"; }
# seconds as read from JSON (2.2953177619999998) to a sensible precision: 2.295
secs() { awk -v x="$1" 'BEGIN { printf "%.3f", x }'; }

# ---- links -----------------------------------------------------------------------------
if [ "$emu" = 0 ]; then
    echo "== bench/transfer: host memory, pinned, and the two-device rows"
    "$xfer" --reps 7 | tee "$tmp/xfer"
    # `row` prints: case, size, "KiB", backend, raw, ratio, unit
    ratio_of() { awk -v c="$1" 'index($0, c) == 1 { print $(NF - 1) }' "$tmp/xfer" | tail -1; }
    value_of() { awk -v c="$1" 'index($0, c) == 1 { print $(NF - 3) }' "$tmp/xfer" | tail -1; }
    both=$(ratio_of "two devices at once vs one")
    peer=$(value_of "peer vs pinned->cuda")
    pinned=$(value_of "pinned->cuda, one device")
    memcpy4=$(value_of "host memcpy 4 threads")
    echo "links: pinned->cuda ${pinned} GB/s, peer ${peer} GB/s; two devices at once get" \
         "${both}x one device's pinned bandwidth; host memcpy x4 ${memcpy4} GB/s"
fi

# ---- one manager, two GPUs ---------------------------------------------------------------
echo "== $two: one manager, cuda:0 and cuda:1 (prediction, then the run on $dev)"
"$fp" check "$two" | grep -E 'transfers:|policy' || true
"$fp" check --json "$two" > "$tmp/check"
"$fp" run --device "$dev" $run_scale --json "$two" > "$tmp/two"
t2=$(q "$tmp/two" .totals.time_s)
p2=$(q "$tmp/two" .totals.pcie_bytes)
n2=$(q "$tmp/two" .totals.peer_bytes)
echo "one manager, two GPUs: time $(secs "$t2") s, PCIe ${p2} bytes, peer ${n2} bytes" \
     "(sizes divided by $scale; check predicts PCIe $(q "$tmp/check" .files[0].pcie_bytes)," \
     "peer $(q "$tmp/check" .files[0].peer_bytes) bytes unscaled)"

# ---- independent ranks on the same keys ------------------------------------------------
if ! "$fp" --version | grep -q '(MPI)'; then
    echo "two-gpu: the ranks part needs fheplan built with Open MPI (make deps; not MPI=0)" >&2
    exit 1
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
[ "$emu" = 1 ] && export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
echo "== $one: one rank, then two independent ranks (each its own manager and GPU)"
mpirun --allow-run-as-root -n 1 "$fp" run --device "$mpidev" $run_scale --json "$one" > "$tmp/r1"
mpirun --oversubscribe --allow-run-as-root -n 2 "$fp" run --device "$mpidev" $run_scale \
    --json "$one" > "$tmp/r2"
t1=$(q "$tmp/r1" .totals.time_s)
m1=$(q "$tmp/r1" .totals.bytes_moved)
p1=$(q "$tmp/r1" .ranks[0].output.totals.pcie_bytes)
echo "one rank: time $(secs "$t1") s, PCIe ${p1} bytes"
pr=0
for r in 0 1; do
    tr=$(q "$tmp/r2" ".ranks[$r].output.totals.time_s")
    pb=$(q "$tmp/r2" ".ranks[$r].output.totals.pcie_bytes")
    pr=$((pr + pb))
    echo "two ranks, rank $r: time $(secs "$tr") s, PCIe ${pb} bytes"
done
tm=$(q "$tmp/r2" .totals.time_s)
mm=$(q "$tmp/r2" .totals.bytes_moved)
awk -v t1="$t1" -v m1="$m1" -v tm="$tm" -v mm="$mm" -v t2="$t2" -v p2="$p2" -v pr="$pr" 'BEGIN {
    s = (mm / tm) / (m1 / t1)
    printf "two ranks: %.3f s (slowest), %d PCIe bytes; scaling %.3fx of one rank\n", tm, pr, s
    printf "one manager over both GPUs against two ranks: time %.3fx, PCIe bytes %.3fx\n",
           t2 / tm, p2 / pr
}'
if [ "$emu" = 0 ]; then
    awk -v both="$both" -v mm="$mm" -v tm="$tm" -v m1="$m1" -v t1="$t1" 'BEGIN {
        s = (mm / tm) / (m1 / t1)
        if (both < 1.9)
            printf "why not 2x: two devices loading at once get %.2fx one device (host memory or a shared PCIe switch); the ranks get %.2fx\n", both, s
        else
            printf "why not 2x: the links scale (%.2fx with two devices at once) but the ranks get %.2fx: their own overheads (compare the per-rank times above)\n", both, s
    }'
fi
