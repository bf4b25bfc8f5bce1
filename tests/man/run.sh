#!/bin/sh
# tests/man/run.sh — `make test-man`: lints every page of man/ with mandoc (cross
# references resolved against man/ itself), checks that every function of the API has a
# section-3 page that `man NAME` finds once installed, and runs every tested example of
# the pages (man/*.3 and man/*.7; see extract.sh for the markers): each page has one. POSIX sh; no GPU needed: C examples run on
# the emulated device and plans run with --device emu.
#
# Environment (set by mk/guides.mk): BUILD (build folder holding libfheplan.a,
# libfheplan.so and fheplan), MAKE, CC, LDLIBS, and optionally LDFLAGS and SAN.
set -u
BUILD=${BUILD:-build}
CC=${CC:-cc}
LDLIBS=${LDLIBS:--lcjson -lpthread -lm}
root=$(pwd)
build=$root/$BUILD
fail=0
ntests=0

say() { printf '%s\n' "$*"; }
bad() { say "FAIL: $*"; fail=$((fail + 1)); }

# ---- lint ------------------------------------------------------------------------------
# A throw-away man tree with every page of man/ and its mandoc.db, so that Xr to our own
# pages resolves; mandoc then reports anything of level STYLE or above.
tree=$build/mantree
rm -rf "$tree"
for p in man/*.[0-9]; do
    s=${p##*.}
    mkdir -p "$tree/man$s"
    cp "$p" "$tree/man$s/"
done
mkwhatis=$(command -v makewhatis || echo /usr/sbin/makewhatis)
if ! "$mkwhatis" "$tree"; then
    bad "makewhatis $tree"
fi
lint=$(MANPATH=$tree mandoc -Tlint -Wstyle man/*.[0-9] 2>&1)
rc=$?
if [ $rc -ne 0 ] || [ -n "$lint" ]; then
    say "$lint"
    bad "mandoc -Tlint -Wstyle man/* (exit $rc)"
else
    say "lint: $(ls man/*.[0-9] | wc -l | tr -d ' ') pages clean (mandoc -Tlint -Wstyle)"
fi
# groff is one of `make deps`' packages: without it the second lint cannot run, which fails.
if command -v groff >/dev/null 2>&1; then
    for p in man/*.[0-9]; do
        # typeset (the default device) and for an 80-column terminal
        w=$(groff -mandoc -ww -z "$p" 2>&1; groff -mandoc -Tutf8 -ww -z "$p" 2>&1)
        [ -z "$w" ] || { say "$w"; bad "groff -ww $p"; }
    done
    say "lint: groff -ww clean"
else
    bad "groff not found (make deps installs it)"
fi

# ---- a page for every function ---------------------------------------------------------
# Every function the built library exports, and every function a public header declares
# (the static inline ones included), is named in the NAME section of a section-3 page and
# in its SYNOPSIS; every name a NAME section lists is a function of the API; and after
# `make install` into a scratch prefix `man -M PREFIX/share/man 3 NAME` finds, for each
# name, a page whose NAME section lists it.
names=$build/man-names
rm -rf "$names"
mkdir -p "$names"
nm -D --defined-only "$build/libfheplan.so" | awk '$2 == "T" { print $3 }' | sort -u \
    >"$names/exported"
# FHR_API declarations, and static inline definitions, of include/fheplan/*.h
for h in include/fheplan/*.h; do
    sed '/^[[:space:]]*#/d' "$h" | tr '\n' ' ' | sed 's/;/;\n/g; s/{/{\n/g' |
        grep -E '(FHR_API|static inline|_INLINE) ' |
        sed -n 's/.*[ *]\([A-Za-z_][A-Za-z0-9_]*\) *(.*/\1/p'
done | sort -u >"$names/declared"
sort -u "$names/exported" "$names/declared" >"$names/api"
: >"$names/named"
for p in man/*.3; do
    awk -v page="$p" '
        /^\.Sh / { sec = $2 }
        sec == "NAME" && /^\.Nm / { print $2 > "/dev/stdout"; nm[$2] = 1 }
        sec == "SYNOPSIS" && /^\.Fn / { fn[$2] = 1 }
        END {
            for (n in nm) if (!(n in fn)) printf "%s: %s is in NAME but has no .Fn in SYNOPSIS\n", page, n > "/dev/stderr"
            for (n in fn) if (!(n in nm)) printf "%s: %s has a .Fn in SYNOPSIS but is not in NAME\n", page, n > "/dev/stderr"
        }' "$p" >>"$names/named" 2>>"$names/synopsis"
done
sort "$names/named" | uniq -d >"$names/twice"
sort -u -o "$names/named" "$names/named"
comm -23 "$names/api" "$names/named" >"$names/missing"
comm -13 "$names/api" "$names/named" >"$names/unknown"
if [ -s "$names/missing" ]; then
    say "functions of the API that no page's NAME section lists (add each to the NAME and"
    say "SYNOPSIS of the page of its group, or write a page: see man/README):"
    sed 's/^/  /' "$names/missing"
    bad "$(wc -l <"$names/missing" | tr -d ' ') of $(wc -l <"$names/api" | tr -d ' ') functions have no page"
fi
[ -s "$names/unknown" ] && { sed 's/^/  /' "$names/unknown"; bad "pages list names the API does not have"; }
[ -s "$names/twice" ] && { sed 's/^/  /' "$names/twice"; bad "names listed by two pages"; }
[ -s "$names/synopsis" ] && { cat "$names/synopsis"; bad "NAME and SYNOPSIS disagree"; }
stage=$build/man-stage
rm -rf "$stage"
if ! ${MAKE:-make} --no-print-directory install BUILD="$BUILD" PREFIX="$stage" >"$names/install.log" 2>&1; then
    cat "$names/install.log"
    bad "make install PREFIX=$stage"
fi
nres=0
while read -r n; do
    f=$(MANPAGER=cat man -M "$stage/share/man" -w 3 "$n" 2>/dev/null) &&
        [ -n "$f" ] && f=$(readlink -f "$f") &&
        awk -v n="$n" '/^\.Sh / { sec = $2 } sec == "NAME" && $1 == ".Nm" && $2 == n { ok = 1 } END { exit !ok }' "$f" &&
        MANPAGER=cat MANWIDTH=80 man -M "$stage/share/man" 3 "$n" 2>/dev/null | grep -q "$n" ||
        { bad "man -M $stage/share/man 3 $n finds no page that documents it"; continue; }
    nres=$((nres + 1))
done <"$names/api"
say "pages: $(wc -l <"$names/named" | tr -d ' ') of $(wc -l <"$names/api" | tr -d ' ') functions named in $(ls man/*.3 | wc -l | tr -d ' ') section-3 pages; man -M resolves $nres"

# ---- examples --------------------------------------------------------------------------
out=$build/man-tests
rm -rf "$out"
mkdir -p "$out/bin"
ln -s "$build/fheplan" "$out/bin/fheplan"
if ! sh tests/man/extract.sh "$out" man/*.3 man/*.7; then
    bad "extract.sh"
fi
export PATH="$out/bin:$PATH" FHEPLAN_DEVICE=emu:1 NO_COLOR=1

# Replays a "$ command" transcript in the current folder, writing the actual one.
replay() { # file.sh actual mode
    : >"$2"
    awk '/^\$ /{ print substr($0, 3) }' "$1" >"$2.cmds"
    while IFS= read -r cmd; do
        printf '$ %s\n' "$cmd" >>"$2"
        if [ "$3" = exact ]; then
            sh -c "$cmd" >>"$2" 2>&1 </dev/null
        else
            sh -c "$cmd" >"$2.out" 2>&1 </dev/null || { cat "$2.out"; return 1; }
        fi
    done <"$2.cmds"
    return 0
}

for dir in "$out"/*/; do
    dir=${dir%/}
    page=$(basename "$dir")
    [ "$page" = bin ] && continue
    n=0
    while read -r kind name; do
        n=$((n + 1))
        ntests=$((ntests + 1))
        t="$page: $kind $name"
        (
            cd "$dir" || exit 1
            [ -e plans ] || ln -s "$root/plans" plans
            case $kind in
            c)
                # shellcheck disable=SC2086
                $CC -std=c11 -Wall -Wextra -Werror ${SAN:-} -I"$root/include" "$name.c" \
                    -o "$name" "$build/libfheplan.a" ${LDFLAGS:-} $LDLIBS || exit 1
                if [ -f "$name.expect" ]; then
                    ./"$name" >"$name.out" || exit 1
                    diff -u "$name.expect" "$name.out" || exit 1
                else
                    ./"$name" || exit 1
                fi
                ;;
            rplan)
                fheplan check "$name.rplan" >"$name.check" 2>&1 || { cat "$name.check"; exit 1; }
                fheplan run --device emu --quiet "$name.rplan" >"$name.run" 2>&1 ||
                    { cat "$name.run"; exit 1; }
                ;;
            rplan-fail)
                [ -f "$name.expect" ] || { echo "no expect block for $name"; exit 1; }
                fheplan check "$name.rplan" >/dev/null 2>"$name.err"
                rc=$?
                [ $rc -eq 1 ] || { echo "check exited $rc, expected 1"; exit 1; }
                diff -u "$name.expect" "$name.err" || exit 1
                ;;
            sh)
                replay "$name.sh" "$name.actual" exact
                diff -u "$name.sh" "$name.actual" || exit 1
                ;;
            sh-run)
                replay "$name.sh" "$name.actual" run || exit 1
                ;;
            esac
        ) >"$dir/$name.log" 2>&1
        if [ $? -eq 0 ]; then
            say "ok   $t"
        else
            cat "$dir/$name.log"
            bad "$t"
        fi
    done <"$dir/tests"
    [ $n -gt 0 ] || bad "$page: no tested example"
done

if [ $fail -ne 0 ]; then
    say "test-man: $fail failed ($ntests examples)"
    exit 1
fi
say "test-man: $ntests examples passed"
