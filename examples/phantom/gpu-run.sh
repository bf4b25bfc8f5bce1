#!/bin/sh
# examples/phantom/gpu-run.sh — runs the bundled Phantom example on a GPU host that has no
# network and no build tools: the CUDA backend's GPU suite, then every budget (4 keys, 8
# keys, all 14), each with whole keys and then with seeded keys, controller-driven and
# plan-driven (bsgs.rplan, bsgs-seeded.rplan: the VM embedded in Phantom), in one process,
# writing the logs, results.json and the .rplan files checked by `fheplan check` into $OUT;
# at the end, the plan-driven seeded runs side by side with the controller-driven ones.
#   OUT=/some/dir sh .gpu/phantom/gpu-run.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
    echo "== host"
    uname -a
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
    echo "== fheplan"
    "$here/fheplan" --version
} >"$out/host.txt" 2>&1
rc=0
# the CUDA backend's own GPU suite first (private pool, views of engine streams)
if [ -x "$here/gpu" ]; then
    "$here/gpu" --jobs=1 >"$out/gpu-tests.log" 2>&1 || rc=1
    tail -1 "$out/gpu-tests.log"
fi
"$here/phantom-bsgs" --out "$out" --fheplan "$here/fheplan" --budgets 4,8,0 --reps 2 \
    2>&1 | tee "$out/phantom-bsgs.log" || rc=$?
# tee hides the program's status: the log's last lines say whether every check passed
grep -q '^all checks, times against the issue.s bound: PASS' "$out/phantom-bsgs.log" || rc=1
grep -q '^seeded keys, every budget: .*: PASS$' "$out/phantom-bsgs.log" || rc=1
grep -q '^plan-driven seeded keys, every budget: .*: PASS$' "$out/phantom-bsgs.log" || rc=1
# the seeded comparison: per budget, plan-driven against controller-driven and check
echo "== seeded keys: the plan (bsgs-seeded.rplan) against the controller-driven loop"
grep -e '^budget ' -e '^  seeded keys' -e '^  the seeded plan' -e '^    results bit-identical' \
    -e '^    bytes moved' -e '^    bytes over PCIe' -e '^    both passes' \
    "$out/phantom-bsgs.log" || true
echo "gpu-run: results in $out (status $rc)"
exit "$rc"
