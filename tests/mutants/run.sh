#!/bin/sh
# tests/mutants/run.sh — `make test-mutants`: shows that the suite notices deliberate
# breaks. Copies the tree to a scratch folder, builds it once (CUDA=0, MPI=0), checks that
# the suites named for each break pass on the intact copy, then for each line of
# tests/mutants/mutants.tsv applies the break, rebuilds what it touches and runs those
# suites: each must fail. The copy is restored between mutants. POSIX sh and perl.
#
# MUTANT_SAMPLE=K (make test: K=6) runs a deterministic sample: the 1st, (K+1)th, (2K+1)th
# ... line and the first line of every folder not yet covered, so that each area keeps a
# break; every other line is still checked to apply. MUTANT_SAMPLE=all (make test-long)
# runs every line.
#
# Usage: tests/mutants/run.sh [SCRATCH]   (default build/mutants)
set -u
root=$(pwd)
work=${1:-build/mutants}
list=$root/tests/mutants/mutants.tsv
jobs=${MUTANT_JOBS:-2}
sample=${MUTANT_SAMPLE:-all}
say() { printf 'test-mutants: %s\n' "$*"; }
case $sample in all) ;; *[!0-9]* | '' | 0) say "MUTANT_SAMPLE must be 'all' or a positive count, not '$sample'"; exit 1 ;; esac

rm -rf "$work" && mkdir -p "$work/tree" || exit 1
work=$(cd "$work" && pwd) # the steps below run inside the copy
sh "$root/tests/mutants/copy-tree.sh" "$root" "$work/tree" || { say "cannot copy the tree"; exit 1; }
cd "$work/tree" || exit 1
# MUTANT_SEED=DIR (make passes its BUILD when that is a CUDA=0 build, as the copy's is):
# the copy builds in the same folder name, seeded with that build's library and test
# objects (mtimes kept, so make rebuilds only what is older than its source; the CLI's
# objects are rebuilt, the copy having no MPI).
b=build
seed=${MUTANT_SEED:-}
if [ -n "$seed" ] && [ -d "$root/$seed/obj" ]; then
    b=$seed
    mkdir -p "$b" || exit 1
    dirs=$(cd "$root/$seed" && for d in gen obj/base obj/cuda obj/runtime obj/compiler obj/gen \
        obj/tests/unit obj/bench; do [ -d "$d" ] && echo "$d"; done)
    # shellcheck disable=SC2086 # a list of folder names without spaces
    (cd "$root/$seed" && tar cf - $dirs) | (cd "$b" && tar xf -) \
        || { say "cannot seed the copy from $seed"; exit 1; }
    say "the copy's build seeded from $seed"
fi
mk() { make --no-print-directory -j"$jobs" CUDA=0 MPI=0 BUILD="$b" "$b/tests/unit" "$b/fheplan" \
    >"$work/build.log" 2>&1; }
start=$(date +%s)

# Every line must still apply (its text occurs exactly once); the chosen ones go to $sel.
sel=$work/selected.tsv
SAMPLE=$sample perl -F'\t' -lane '
    BEGIN { $k = $ENV{SAMPLE}; }
    next if /^#/ || !/\S/;
    ($name, $file, $old) = @F[0, 1, 3];
    $old =~ s/\\n/\n/g;
    open my $fh, "<", $file or die "mutant \x27$name\x27: cannot read $file\n";
    local $/; $text = <$fh>; close $fh;
    $c = () = $text =~ /\Q$old\E/g;
    die "mutant \x27$name\x27 no longer applies to $file (matches $c times): update tests/mutants/mutants.tsv\n" if $c != 1;
    ($dir = $file) =~ s{/[^/]*$}{};
    $i++;
    if ($k eq "all" || ($i - 1) % $k == 0 || !$seen{$dir}) { $seen{$dir} = 1; print; }
' "$list" >"$sel" || { say "tests/mutants/mutants.tsv does not apply to this tree"; exit 1; }
total=$(grep -cv -e '^#' -e '^[[:space:]]*$' "$list")
chosen=$(wc -l <"$sel" | tr -d ' ')
[ "$sample" = all ] || say "a sample of $chosen of the $total mutants (every ${sample}th and one per folder; all: make test-long)"

mk || { tail -30 "$work/build.log"; say "the intact copy does not build"; exit 1; }

# Runs the suites named by $1 ("cli" globs included); 0 when every one passed.
suites() {
    for f in $1; do
        "$b/tests/unit" --jobs="$jobs" --filter "$f" >>"$work/run.log" 2>&1 || return 1
    done
    return 0
}

# The intact copy passes every named suite (else a "kill" below would prove nothing).
all=$(cut -f3 "$sel" | tr ' ' '\n' | sort -u | tr '\n' ' ')
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
done <"$sel"
mk || { say "the restored copy does not build"; exit 1; }
say "$killed of $n mutants killed in $(($(date +%s) - start)) s"
[ -z "$missed" ] || { say "not noticed:$missed"; exit 1; }
