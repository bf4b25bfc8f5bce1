#!/bin/sh
# tests/tools/pylayers.sh — the layering of the Python binding's C (python/src/), proved from
# objects compiled here one file at a time: which file calls which (nm), that no file calls
# one above it, and so that no two files call in a circle. A type object named by a file
# counts as a call of the file that defines it.
#
# usage: tests/tools/pylayers.sh CC PY_INCLUDE   (exit 0: clean, 1: a violation, 2: usage)
#
# The layers, lowest first (a file may call its own layer's file and those below):
#   core  stream  value  lease plan program  manager  controller timing  module
# core.c (the ownership rule, the liveness check, errors, converters, locations and handles)
# calls no other file; module.c (the init) may call all of them.
set -eu
cc=${1:?usage: pylayers.sh CC PY_INCLUDE}
inc=${2:?usage: pylayers.sh CC PY_INCLUDE}
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in "$root"/python/src/*.c; do
    b=$(basename "$f" .c)
    "$cc" -D_GNU_SOURCE -I"$root/include" -I"$root/python/src" -I"$inc" -std=c11 -fPIC \
        -c "$f" -o "$tmp/$b.o" || exit 2
    nm "$tmp/$b.o" | awk -v f="$b" '
        $1 == "U" { print f, "U", $2; next }
        NF == 3 && $2 ~ /^[TDBRCV]$/ { print f, "D", $3 }'
done >"$tmp/syms"
awk '
function rank(f) {
    if (f == "core") return 0
    if (f == "stream") return 1
    if (f == "value") return 2
    if (f == "lease" || f == "plan" || f == "program") return 3
    if (f == "manager") return 4
    if (f == "controller" || f == "timing") return 5
    if (f == "module") return 6
    return -1
}
$2 == "D" { def[$3] = $1; next }
{ use[++n] = $1; sym[n] = $3 }
END {
    for (i = 1; i <= n; i++) {
        d = def[sym[i]]
        if (d == "" || d == use[i]) continue
        if (rank(use[i]) < 0) { printf "pylayers: python/src/%s.c is in no layer\n", use[i]; bad = 1; continue }
        if (rank(d) > rank(use[i]) || (rank(d) == rank(use[i]) && d != use[i])) {
            where = (rank(d) > rank(use[i])) ? "a layer above it" : "a file beside it"
            printf "pylayers: python/src/%s.c calls %s of %s.c, %s\n", use[i], sym[i], d, where
            bad = 1
        }
        calls++
    }
    if (!bad) printf "pylayers: python/src clean (%d calls between files, none upwards or sideways)\n", calls
    exit bad
}' "$tmp/syms"
