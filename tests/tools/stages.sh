#!/bin/sh
# tests/tools/stages.sh MAKE BUILD-TARGETS UNIT-COMMAND TARGET... — the body of `make
# test-run`: builds BUILD-TARGETS (`MAKE BUILD-TARGETS`), runs the unit suite (none when
# UNIT-COMMAND is -), then each extra suite (`MAKE TARGET`) in turn, stopping at the first that
# fails, and ends with a table of the seconds each stage took, wall clock and CPU (also
# on failure), so that a slow `make test` says where its time went. POSIX sh.
set -u
mk=$1 build=$2 unit=$3
shift 3
table=$(mktemp) || exit 1
trap 'rm -f "$table" "$table.cpu"' EXIT
all=$(date +%s)
status=0
# The CPU seconds (user + system) of every finished child so far, into $cpu: `times` must
# run in this shell (in a pipe or $(...) it would count a subshell's children).
cpu_now() {
    times >"$table.cpu"
    cpu=$(awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/);
        n += a[1] * 60 + a[2] } printf "%.0f", n }' "$table.cpu")
}
run() { # NAME COMMAND...
    name=$1
    shift
    t0=$(date +%s)
    cpu_now
    c0=$cpu
    "$@"
    rc=$?
    cpu_now
    printf '%-22s %6s s %8s s%s\n' "$name" "$(($(date +%s) - t0))" "$((cpu - c0))" \
        "$([ $rc = 0 ] || echo '  FAILED')" >>"$table"
    return $rc
}
# shellcheck disable=SC2086 # $unit and $mk are command lines
if run build $mk $build && { [ "$unit" = - ] || run unit $unit; }; then
    for t in "$@"; do run "$t" $mk "$t" || { status=1; break; }; done
else
    status=1
fi
echo "---- seconds per stage: wall clock, and CPU (user + system) of its processes"
printf '%-22s %8s %10s\n' stage wall CPU
cat "$table"
cpu_now
printf '%-22s %6s s %8s s\n' total "$(($(date +%s) - all))" "$cpu"
exit $status
