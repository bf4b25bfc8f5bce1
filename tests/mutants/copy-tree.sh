#!/bin/sh
# tests/mutants/copy-tree.sh SRC DEST — copies the files git would commit from the checkout
# SRC (tracked files still present, untracked files that .gitignore does not exclude) into
# DEST, in one archive whatever their number: a virtualenv, build outputs or editor files
# ignored by .gitignore never travel. tar's own errors are shown. POSIX sh, git, tar, perl.
set -u
src=$1 dest=$2
say() { printf 'copy-tree: %s\n' "$*" >&2; }
[ -d "$dest" ] || { say "$dest is not a folder"; exit 1; }
tmp=$(mktemp -d) || { say "cannot make a scratch folder"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
# The list, NUL-separated; a tracked file deleted in the work tree is left out.
(cd "$src" && git ls-files -co --exclude-standard -z) >"$tmp/all" \
    || { say "$src: git ls-files failed (not a git checkout?)"; exit 1; }
(cd "$src" && perl -0ne 'chomp; print "$_\0" if -e $_ || -l $_') <"$tmp/all" >"$tmp/names" \
    || { say "cannot filter the file list"; exit 1; }
n=$(tr -cd '\0' <"$tmp/names" | wc -c)
(cd "$src" && tar --null -T "$tmp/names" -cf "$tmp/tree.tar") \
    || { say "tar could not archive the $n files of $src"; exit 1; }
(cd "$dest" && tar xf "$tmp/tree.tar") || { say "tar could not unpack into $dest"; exit 1; }
