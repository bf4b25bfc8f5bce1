#!/bin/sh
# tests/tools/stages.sh MAKE BUILD-TARGETS UNIT-COMMAND TARGET... — the body of `make
# test-run`: builds BUILD-TARGETS (`MAKE BUILD-TARGETS`), runs the unit suite (none when
# UNIT-COMMAND is -), then each extra suite (`MAKE TARGET`) in turn, stopping at the first that
# fails, and ends with a table of the seconds each stage took (also on failure), so that
# a slow `make test` says where its time went. POSIX sh.
set -u
mk=$1 build=$2 unit=$3
shift 3
table=$(mktemp) || exit 1
trap 'rm -f "$table"' EXIT
all=$(date +%s)
status=0
run() { # NAME COMMAND...
    name=$1
    shift
    t0=$(date +%s)
    "$@"
    rc=$?
    printf '%-22s %6s s%s\n' "$name" "$(($(date +%s) - t0))" "$([ $rc = 0 ] || echo '  FAILED')" >>"$table"
    return $rc
}
# shellcheck disable=SC2086 # $unit and $mk are command lines
if run build $mk $build && { [ "$unit" = - ] || run unit $unit; }; then
    for t in "$@"; do run "$t" $mk "$t" || { status=1; break; }; done
else
    status=1
fi
echo "---- make test: seconds per stage"
cat "$table"
printf '%-22s %6s s\n' total "$(($(date +%s) - all))"
exit $status
