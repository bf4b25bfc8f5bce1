#!/bin/sh
# tests/tools/layers.sh — proves the layering from the objects the build made: which file
# calls which (nm), that no folder calls one above it, and that no two files call in a circle.
#
# usage: tests/tools/layers.sh OBJ_DIR [OBJ...]   (exit 0: clean, 1: a violation, 2: usage)
# OBJ_DIR is the build's obj/ folder; the objects default to every library and CLI object in it.
# The internal headers each source file includes are held to the same order.
#
# The layers, lowest first (README "Layout"; a file may call its own layer and those below):
#   base  cuda  runtime/manager  runtime/plan  runtime/control  runtime/program  runtime/vm
#   compiler (and the generated lexer and parser)  cli
# The Python binding (python/) sits beside the CLI and includes public headers only.
set -eu
obj=${1:?usage: layers.sh OBJ_DIR [OBJ...]}
[ -d "$obj" ] || { echo "layers: $obj: no objects (build first)" >&2; exit 2; }
shift
if [ $# -gt 0 ]; then
    files=$(for o in "$@"; do echo "${o#"$obj"/}"; done | sort)
else
    files=$(cd "$obj" && find base cuda runtime compiler gen cli -name '*.o' 2>/dev/null | sort)
fi
[ -n "$files" ] || { echo "layers: $obj: no library objects" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

# One line per (file, kind, symbol): D for a definition, U for a use.
for f in $files; do
    nm "$obj/$f" | awk -v f="$f" '
        $1 == "U" { print f, "U", $2; next }
        NF == 3 && $2 ~ /^[TDBRCV]$/ { print f, "D", $3 }'
done >"$tmp"
# One line per (file, I, header) for the project's own internal headers.
(cd "$root" && grep -H -o '^#include "\(base\|cuda\|runtime\|compiler\|cli\)/[^"]*"' \
    $(find base cuda runtime compiler cli grammar python -name '*.[chy]' -o -name '*.re' -o -name '*.cu') |
    sed 's/^\([^:]*\):#include "\(.*\)"$/\1 I \2/') >>"$tmp"
awk '
function rank(f) {
    if (f ~ /^base\//) return 0
    if (f ~ /^cuda\//) return 1
    if (f ~ /^runtime\/manager\//) return 2
    if (f ~ /^runtime\/plan\//) return 3
    if (f ~ /^runtime\/control\//) return 4
    if (f ~ /^runtime\/program\//) return 5
    if (f ~ /^runtime\/vm\//) return 6
    if (f ~ /^(compiler|gen|grammar)\//) return 7
    if (f ~ /^cli\//) return 8
    return -1
}
function src(f) { sub(/\.o$/, "", f); sub(/^gen\//, "(generated) ", f); return f }
$2 == "D" { def[$3] = $1; next }
$2 == "I" {
    if ($1 ~ /^python\//) { printf "layers: %s includes %s: the Python binding uses the public headers only\n", $1, $3; bad = 1 }
    else if (rank($1) < 0 || rank($3) < 0) { printf "layers: %s includes %s, in no layer\n", $1, $3; bad = 1 }
    else if (rank($3) > rank($1)) { printf "layers: %s includes %s, a layer above it\n", $1, $3; bad = 1 }
    ninc++; next
}
{ use[++nu] = $1; usym[nu] = $3 }
END {
    for (i = 1; i <= nu; i++) {
        a = use[i]; s = usym[i]
        if (!(s in def)) continue            # libc, CUDA, cJSON
        b = def[s]
        if (a == b) continue
        if (!((a, b) in edge)) { edge[a, b] = s; n++; node[a]; node[b] }
        if (rank(a) < 0 || rank(b) < 0) {
            printf "layers: %s: in no layer\n", rank(a) < 0 ? src(a) : src(b); bad = 1
        } else if (rank(b) > rank(a)) {
            printf "layers: %s calls up into %s (%s)\n", src(a), src(b), s; bad = 1
        }
    }
    # Transitive closure over the files (a few dozen): reach[a,b] when a calls b in any number of steps.
    for (e in edge) reach[e] = 1
    for (k in node) for (i in node) if ((i, k) in reach) for (j in node) if ((k, j) in reach) reach[i, j] = 1
    for (i in node) for (j in node)
        if (i < j && ((i, j) in reach) && ((j, i) in reach)) {
            printf "layers: circle: %s and %s call each other", src(i), src(j)
            if ((i, j) in edge) printf " (%s", edge[i, j]; else printf " (through others"
            if ((j, i) in edge) printf ", %s)\n", edge[j, i]; else printf ", through others)\n"
            bad = 1
        }
    if (!bad) printf "layers: %d calls between files and %d includes, all downward, no circle\n", n, ninc
    exit bad
}' "$tmp"
