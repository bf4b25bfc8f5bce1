#!/bin/sh
# examples/cheddar/gpu-run.sh — runs the bundled Cheddar example on a GPU host that has no
# network and no build tools: Cheddar generates its keys once, then every batch size, mode
# and budget runs in that one process, writing the log, results.json and every generated
# .rplan (each checked by the bundled `fheplan check`) into $OUT.
#   OUT=/some/dir sh .gpu/cheddar/gpu-run.sh [cheddar-boot options]
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
"$here/cheddar-boot" "$here/params/bootparam_40.json" "$out" --fheplan "$here/fheplan" "$@" \
    2>&1 | tee "$out/cheddar-boot.log" || rc=$?
# tee hides the program's status: its last line says whether every check passed
grep -q '^cheddar-boot: PASS' "$out/cheddar-boot.log" || rc=1
# the generated plans, one file to carry back
if [ -d "$out/plans" ]; then
    tar czf "$out/plans.tgz" -C "$out" plans && rm -rf "$out/plans"
fi
echo "gpu-run: results in $out (status $rc)"
exit "$rc"
