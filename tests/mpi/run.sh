#!/bin/sh
# tests/mpi/run.sh FHEPLAN JSONQ — fheplan under mpirun on the emulated device: two- and
# four-rank runs, the gathered report (every rank present, totals = sums, time = the
# slowest rank's), a batch split by rank, check under MPI and --world-size, and a failure
# on one rank that is reported with its rank, exits 1 and hangs nobody (each job runs
# under `timeout`). Works as root in a container without network (btl self,vader).
set -u
fp=$1
q=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_plm_rsh_agent=
export ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0 # Open MPI's own
unset FHEPLAN_DEVICE
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }
# expect DESC ACTUAL WANT
expect() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi; }
mpi() { n=$1; shift; timeout 120 mpirun --oversubscribe --allow-run-as-root -n "$n" "$@"; }
jq_() { "$q" "$2" < "$1"; }

# ---- two ranks, JSON -----------------------------------------------------------------
mpi 2 "$fp" run --device emu --json tests/mpi/batch-split.rplan > "$tmp/j2" 2> "$tmp/e2"
expect "2 ranks: exit 0" $? 0
expect "2 ranks: one document with world_size 2" "$(jq_ "$tmp/j2" .world_size)" 2
expect "2 ranks: ok" "$(jq_ "$tmp/j2" .ok)" true
expect "2 ranks: both ranks present" "$(jq_ "$tmp/j2" .ranks#)" 2
for r in 0 1; do
  expect "2 ranks: rank $r in place $r" "$(jq_ "$tmp/j2" ".ranks[$r].rank")" $r
  expect "2 ranks: rank $r ok" "$(jq_ "$tmp/j2" ".ranks[$r].ok")" true
  expect "2 ranks: rank $r compiled as rank $r" \
    "$(jq_ "$tmp/j2" ".ranks[$r].output.stages[0].name")" "rank-$r"
done
expect "2 ranks: 10 ciphertexts x (keyswitch + verify) bodies" "$(jq_ "$tmp/j2" .totals.bodies)" 20
b0=$(jq_ "$tmp/j2" .ranks[0].output.totals.bytes_moved)
b1=$(jq_ "$tmp/j2" .ranks[1].output.totals.bytes_moved)
expect "2 ranks: total bytes = sum over ranks" "$(jq_ "$tmp/j2" .totals.bytes_moved)" $((b0 + b1))
expect "2 ranks: integrity" "$(jq_ "$tmp/j2" .totals.integrity.ok)" true
expect "2 ranks: nothing on stderr" "$(cat "$tmp/e2")" ""

# ---- four ranks, JSON: the batch of 10 splits 2, 3, 2, 3 -------------------------------
mpi 4 "$fp" run --device emu --json tests/mpi/batch-split.rplan > "$tmp/j4" 2> "$tmp/e4"
expect "4 ranks: exit 0" $? 0
expect "4 ranks: all present" "$(jq_ "$tmp/j4" .ranks#)" 4
sum=0
max=0
i=0
for share in 2 3 2 3; do
  expect "4 ranks: rank $i takes $share ciphertexts" \
    "$(jq_ "$tmp/j4" ".ranks[$i].output.totals.plans")" $((share + 1))
  sum=$((sum + $(jq_ "$tmp/j4" ".ranks[$i].output.totals.bytes.h2d")))
  t=$(jq_ "$tmp/j4" ".ranks[$i].output.totals.time_s")
  max=$(awk -v a="$max" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
  i=$((i + 1))
done
expect "4 ranks: h2d bytes = sum over ranks" "$(jq_ "$tmp/j4" .totals.bytes.h2d)" $sum
expect "4 ranks: time = the slowest rank's" \
  "$(awk -v a="$(jq_ "$tmp/j4" .totals.time_s)" -v b="$max" 'BEGIN { print (a == b) }')" 1
expect "4 ranks: throughput = bytes / time" "$(awk -v b="$(jq_ "$tmp/j4" .totals.bytes_moved)" \
  -v t="$(jq_ "$tmp/j4" .totals.time_s)" -v g="$(jq_ "$tmp/j4" .totals.throughput_gbps)" \
  'BEGIN { d = b / t / 1e9 - g; print (d < 1e-9 && d > -1e-9) }')" 1

# ---- four ranks, text -------------------------------------------------------------------
mpi 4 "$fp" run --device emu tests/mpi/batch-split.rplan > "$tmp/t4" 2> "$tmp/te4"
expect "4 ranks text: exit 0" $? 0
expect "4 ranks text: one line per rank" "$(grep -c '^  rank [0-3] (emu): ' "$tmp/t4")" 4
expect "4 ranks text: totals" "$(grep -c '^total over 4 ranks on emu: ' "$tmp/t4")" 1
expect "4 ranks text: ok" "$(tail -n 1 "$tmp/t4")" ok

# ---- a failure on rank 1 of 2: reported with its rank, exit 1, no hang ---------------
mpi 2 "$fp" run --device emu --budget cuda:0=60MiB tests/mpi/rank-budget.rplan \
  > "$tmp/f" 2> "$tmp/fe"
rc=$?
expect "rank 1 fails: exit 1 (not a timeout)" $rc 1
expect "rank 1 fails: named with its rank and position" \
  "$(grep -c '^fheplan: rank 1: tests/mpi/rank-budget.rplan:6:28: error: move of .ct. to cuda:0 exceeds the budget' "$tmp/fe")" 1
expect "rank 1 fails: rank 0 still ran" "$(grep -c '^  rank 0 (emu): .*1 body$' "$tmp/f")" 1
expect "rank 1 fails: summary" "$(tail -n 1 "$tmp/f")" "FAILED on 1 of 2 ranks"
mpi 2 "$fp" run --device emu --json --budget cuda:0=60MiB tests/mpi/rank-budget.rplan \
  > "$tmp/fj" 2> /dev/null
expect "rank 1 fails (json): exit 1" $? 1
expect "rank 1 fails (json): failed_ranks" "$(jq_ "$tmp/fj" .failed_ranks)" "[1]"
expect "rank 1 fails (json): rank 0 ok" "$(jq_ "$tmp/fj" .ranks[0].ok)" true
expect "rank 1 fails (json): diagnostics kept" \
  "$(jq_ "$tmp/fj" .ranks[1].output.diagnostics[0].line)" 6

# ---- check under MPI and with --world-size --------------------------------------------
mpi 2 "$fp" check --budget cuda:0=60MiB tests/mpi/rank-budget.rplan > "$tmp/c" 2> "$tmp/ce"
expect "check under mpirun: exit 1" $? 1
expect "check under mpirun: every rank checked once" "$(grep -c '^rank [01] of 2:$' "$tmp/c")" 2
expect "check under mpirun: names the rank" "$(grep -c "^fheplan: rejected on rank 1 of 2$" "$tmp/ce")" 1
"$fp" check --world-size 4 --json tests/mpi/batch-split.rplan > "$tmp/cw"
expect "check --world-size 4: exit 0" $? 0
expect "check --world-size 4: four ranks" "$(jq_ "$tmp/cw" .ranks#)" 4
expect "check --world-size 4: rank 3 feasible" "$(jq_ "$tmp/cw" .ranks[3].feasible)" true

# ---- one rank, and no mpirun at all ----------------------------------------------------
mpi 1 "$fp" run --device emu --json tests/mpi/batch-split.rplan > "$tmp/j1" 2>/dev/null
expect "1 rank: all 10 ciphertexts" "$(jq_ "$tmp/j1" .ranks[0].output.totals.plans)" 11
"$fp" run --device emu --json tests/mpi/batch-split.rplan > "$tmp/p"
expect "no mpirun: a plain report" "$(jq_ "$tmp/p" .totals.plans)" 11

echo "test-mpi: $pass passed, $fail failed"
[ "$fail" = 0 ]
