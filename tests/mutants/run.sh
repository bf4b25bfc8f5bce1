#!/bin/sh
# tests/mutants/run.sh — `make test-mutants`: shows that the suite notices deliberate
# breaks. Copies the tree to a scratch folder, builds it once (CUDA=0, MPI=0), checks that
# the suites named for each break pass on the intact copy, then for each line of
# tests/mutants/mutants.tsv applies the break, rebuilds what it touches and runs those
# suites: each must fail. The copy is restored between mutants. POSIX sh and perl.
#
# Usage: tests/mutants/run.sh [SCRATCH]   (default build/mutants)
set -u
root=$(pwd)
work=${1:-build/mutants}
list=$root/tests/mutants/mutants.tsv
jobs=${MUTANT_JOBS:-2}
say() { printf 'test-mutants: %s\n' "$*"; }

rm -rf "$work" && mkdir -p "$work/tree" || exit 1
work=$(cd "$work" && pwd) # the steps below run inside the copy
git ls-files -co --exclude-standard -z | xargs -0 tar cf - 2>/dev/null | (cd "$work/tree" && tar xf -) \
    || { say "cannot copy the tree"; exit 1; }
cd "$work/tree" || exit 1
mk() { make --no-print-directory -j"$jobs" CUDA=0 MPI=0 BUILD=build build/tests/unit build/fheplan \
    >"$work/build.log" 2>&1; }
start=$(date +%s)
mk || { tail -30 "$work/build.log"; say "the intact copy does not build"; exit 1; }

# Runs the suites named by $1 ("cli" globs included); 0 when every one passed.
suites() {
    for f in $1; do
        build/tests/unit --jobs="$jobs" --filter "$f" >>"$work/run.log" 2>&1 || return 1
    done
    return 0
}

# The intact copy passes every named suite (else a "kill" below would prove nothing).
all=$(grep -v '^#' "$list" | cut -f3 | tr ' ' '\n' | sort -u | tr '\n' ' ')
: >"$work/run.log"
suites "$all" || { tail -40 "$work/run.log"; say "suites fail on the intact tree: $all"; exit 1; }

n=0 killed=0 missed=""
tab=$(printf '\t')
while IFS="$tab" read -r name file filt old new; do
    case $name in '#'* | '') continue ;; esac
    n=$((n + 1))
    cp "$file" "$work/orig" || exit 1
    if ! OLD=$old NEW=$new perl -0pi -e '
            BEGIN { ($o, $r) = ($ENV{OLD}, $ENV{NEW}); s/\\n/\n/g for $o, $r; }
            $c = () = /\Q$o\E/g; die "matches $c times\n" if $c != 1; s/\Q$o\E/$r/;' "$file"; then
        say "mutant '$name' no longer applies to $file: update tests/mutants/mutants.tsv"
        exit 1
    fi
    : >"$work/run.log"
    if ! mk; then
        result="killed (does not build)"
    elif suites "$filt"; then
        result="MISSED: $filt stayed green"
        missed="$missed
  $name ($file)"
    else
        result="killed by $filt"
    fi
    case $result in killed*) killed=$((killed + 1)) ;; esac
    say "$n. $name: $result"
    cp "$work/orig" "$file" # a new mtime: the next build recompiles it
done <"$list"
mk || { say "the restored copy does not build"; exit 1; }
say "$killed of $n mutants killed in $(($(date +%s) - start)) s"
[ -z "$missed" ] || { say "not noticed:$missed"; exit 1; }
