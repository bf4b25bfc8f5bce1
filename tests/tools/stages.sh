#!/bin/sh
# tests/tools/stages.sh MAKE BUILD-TARGETS UNIT-COMMAND TARGET... — the body of `make
# test-run`: builds BUILD-TARGETS (`MAKE BUILD-TARGETS`), runs the unit suite (none when
# UNIT-COMMAND is -), then each extra suite (`MAKE TARGET`) in turn, stopping at the first that
# fails, and ends with a table of the seconds each stage took, wall clock and CPU (also
# on failure), so that a slow `make test` says where its time went. A TARGET written
# bg:NAME starts in the background when the unit suite has passed, beside the others (a
# suite that shares nothing with them: the deliberate breaks work in their own copy of
# the tree); its output is shown when it ends, and its CPU is its own. POSIX sh.
set -u
mk=$1 build=$2 unit=$3
shift 3
table=$(mktemp) || exit 1
trap 'rm -f "$table" "$table".*' EXIT
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
# bg:NAME: `MAKE NAME` in the background, its output into $table.NAME.log, its wall and CPU
# seconds and status into $table.NAME.end.
bg_start() {
    (
        t0=$(date +%s)
        # shellcheck disable=SC2086
        $mk "$1" >"$table.$1.log" 2>&1
        rc=$?
        times >"$table.$1.cpu"
        c=$(awk 'NR == 2 { n = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/);
            n += a[1] * 60 + a[2] } printf "%.0f", n }' "$table.$1.cpu")
        echo "$rc $(($(date +%s) - t0)) $c" >"$table.$1.end"
    ) &
    bgs="$bgs $1"
}
bg_finish() { # waits for every background suite, shows its output, adds its row
    wait
    for t in $bgs; do
        cat "$table.$t.log"
        read -r rc w c <"$table.$t.end" || { rc=1 w=0 c=0; }
        printf '%-22s %6s s %8s s%s\n' "$t (beside)" "$w" "$c" \
            "$([ "$rc" = 0 ] || echo '  FAILED')" >>"$table"
        [ "$rc" = 0 ] || status=1
        rm -f "$table.$t.log" "$table.$t.cpu" "$table.$t.end"
    done
}
bgs=""
# shellcheck disable=SC2086 # $unit and $mk are command lines
if run build $mk $build && { [ "$unit" = - ] || run unit $unit; }; then
    for t in "$@"; do case $t in bg:*) bg_start "${t#bg:}" ;; esac; done
    for t in "$@"; do
        case $t in bg:*) continue ;; esac
        run "$t" $mk "$t" || { status=1; break; }
    done
    bg_finish
else
    status=1
fi
echo "---- seconds per stage: wall clock, and CPU (user + system) of its processes"
printf '%-22s %8s %10s\n' stage wall CPU
cat "$table"
cpu_now
printf '%-22s %6s s %8s s\n' total "$(($(date +%s) - all))" "$cpu"
exit $status
