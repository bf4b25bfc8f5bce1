#!/bin/sh
# tests/man/extract.sh — pulls the tested examples out of the guides (man/*.7).
#
# Usage: tests/man/extract.sh OUTDIR PAGE...
#
# A test is a literal display (.Bd -literal ... .Ed) preceded, on the line right
# before its .Bd, by a roff comment naming its kind and name:
#
#   .\" test: c NAME           a complete C program        -> OUTDIR/PAGE/NAME.c
#   .\" test: rplan NAME       a plan that must check/run  -> OUTDIR/PAGE/NAME.rplan
#   .\" test: rplan-fail NAME  a plan check must reject    -> OUTDIR/PAGE/NAME.rplan
#   .\" test: expect NAME      the exact diagnostic of it  -> OUTDIR/PAGE/NAME.expect
#   .\" test: sh NAME          "$ cmd" lines, output compared exactly -> NAME.sh
#   .\" test: sh-run NAME      "$ cmd" lines, only the exit status counts -> NAME.sh
#
# The text is un-escaped the way mandoc renders it in a literal display (\e is a
# backslash, \& nothing, \(dq \(aq \- \(ga their characters). OUTDIR/PAGE/tests lists
# "KIND NAME" per test, in page order. POSIX sh and awk only.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 OUTDIR PAGE..." >&2; exit 64; }
out=$1
shift
for page in "$@"; do
    base=$(basename "$page")
    base=${base%.*}
    dir=$out/$base
    rm -rf "$dir"
    mkdir -p "$dir"
    : >"$dir/tests"
    awk -v dir="$dir" -v page="$page" '
    function unescape(s,   r, i, c, n) {
        r = ""
        n = length(s)
        for (i = 1; i <= n; i++) {
            c = substr(s, i, 1)
            if (c != "\\") { r = r c; continue }
            c = substr(s, i + 1, 1)
            if (c == "e") { r = r "\\"; i++ }
            else if (c == "&") { i++ }
            else if (c == "-") { r = r "-"; i++ }
            else if (c == "(") {
                c = substr(s, i + 2, 2)
                if (c == "dq") r = r "\""
                else if (c == "aq") r = r "'\''"
                else if (c == "ga") r = r "`"
                else if (c == "ti") r = r "~"
                else if (c == "ha") r = r "^"
                else { printf "%s:%d: unknown escape \\(%s\n", page, NR, c > "/dev/stderr"; bad = 1 }
                i += 3
            } else { printf "%s:%d: unknown escape \\%s\n", page, NR, c > "/dev/stderr"; bad = 1; i++ }
        }
        return r
    }
    BEGIN { state = 0; bad = 0 }
    state == 2 && /^\.Ed/ { close(file); state = 0; next }
    state == 2 {
        if ($0 ~ /^\.[A-Z]/ && $0 !~ /^\.\\"/) {
            printf "%s:%d: macro inside a tested display\n", page, NR > "/dev/stderr"; bad = 1
        }
        print unescape($0) > file
        next
    }
    state == 1 {
        if ($0 !~ /^\.Bd -literal/) {
            printf "%s:%d: test marker not followed by .Bd -literal\n", page, NR - 1 > "/dev/stderr"
            bad = 1; state = 0; next
        }
        state = 2; next
    }
    /^\.\\" test: / {
        kind = $3; name = $4
        if (kind !~ /^(c|rplan|rplan-fail|expect|sh|sh-run)$/ || name !~ /^[A-Za-z0-9_.-]+$/) {
            printf "%s:%d: bad test marker: %s\n", page, NR, $0 > "/dev/stderr"; bad = 1; next
        }
        ext = kind == "c" ? ".c" : kind ~ /^rplan/ ? ".rplan" : kind == "expect" ? ".expect" : ".sh"
        file = dir "/" name ext
        if (file in seen) { printf "%s:%d: duplicate test %s\n", page, NR, name > "/dev/stderr"; bad = 1 }
        seen[file] = 1
        printf "" > file
        if (kind != "expect") print kind, name >> (dir "/tests")
        state = 1
        next
    }
    END {
        if (state != 0) { printf "%s: unterminated tested display\n", page > "/dev/stderr"; bad = 1 }
        exit bad
    }' "$page"
done
