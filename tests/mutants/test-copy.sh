#!/bin/sh
# tests/mutants/test-copy.sh — the copy step of test-mutants (copy-tree.sh) on a checkout
# as a user has it: thousands of tracked files (more than one command line holds), a
# .venv and build outputs that .gitignore excludes, an untracked new source, a tracked
# file deleted, a name with a space. The copy must hold exactly the tracked and intended
# files. POSIX sh and git.
set -u
root=$(pwd)
t=$(mktemp -d) || exit 1
trap 'rm -rf "$t"' EXIT
fail() { printf 'test-copy: %s\n' "$*"; exit 1; }
mkdir -p "$t/src" "$t/dest" && cd "$t/src" || exit 1
git init -q . || fail "git init"
cp "$root/.gitignore" .
d=runtime/a-folder-whose-long-name-fills-the-command-line-quickly
mkdir -p "$d" base
i=0
while [ $i -lt 3000 ]; do : >"$d/file-number-$i.c"; i=$((i + 1)); done
echo 'int x;' >base/'a name.c'
echo gone >base/deleted.c
git add -A || fail "git add"
rm base/deleted.c                                   # tracked, then deleted
echo 'int y;' >base/new.c                           # untracked, intended
mkdir -p .venv/lib/python3/site-packages build/obj  # ignored
: >.venv/pyvenv.cfg; : >.venv/lib/python3/site-packages/x.py; : >build/obj/a.o
sh "$root/tests/mutants/copy-tree.sh" "$t/src" "$t/dest" || fail "copy-tree.sh failed"
(cd "$t/dest" && find . -type f | sed 's|^\./||' | sort) >"$t/got"
{ git ls-files -c | grep -v '^base/deleted\.c$'; echo base/new.c; } | sort >"$t/want"
cmp -s "$t/got" "$t/want" || { diff "$t/want" "$t/got" | head -20; fail "the copy differs from the tracked and intended files"; }
[ -d "$t/dest/.venv" ] && fail ".venv was copied"
printf 'test-copy: %s files copied in one archive; .venv, build/ and a deleted file left out\n' \
    "$(wc -l <"$t/got" | tr -d ' ')"
