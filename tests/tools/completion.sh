#!/bin/bash
# tests/tools/completion.sh — part of `make test-editors`: editors/bash/fheplan completes
# the subcommands, each one's options (every option fheplan accepts, and only those: each
# offered option is tried against the binary), device specs, policies and plan files.
# Called by hand with COMP_WORDS here (no word breaks but blanks, so whole words come
# back); completion_pty.py drives a real interactive bash with its own word breaks; the
# zsh and fish completions are parsed by their shells and offer the same options.
set -u
BUILD=${BUILD:-build}
source editors/bash/fheplan
COMP_WORDBREAKS=$' \t\n'
fail=0
bad() { echo "test-completion: FAIL: $*"; fail=1; }
complete_line() { # words...: the completions of the last word
    COMP_WORDS=("$@")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _fheplan 2>/dev/null
    printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}
expect() { # want, words...
    local want=$1
    shift
    local got
    got=$(complete_line "$@")
    [[ $got == "$want" ]] || bad "'$*': got '$got', want '$want'"
}
expect "check compile" fheplan c
expect "fmt" fheplan f
expect "--check" fheplan fmt --c
expect "--sarif" fheplan check --s
expect "--scale" fheplan run --sc
expect "--timeline --trace" fheplan run --t
expect "emu emu:1 emu:2 emu:4 emu:8" fheplan run --device emu
expect "lookahead" fheplan check --policy l
expect "time" fheplan run --objective t
expect "auto bytes time" fheplan run --objective ""
expect "cuda:0= cuda:1= cuda:2= cuda:3=" fheplan check --budget cu
expect "plans/ckks-bootstrap-2gpu.rplan plans/ckks-bootstrap-levels.rplan plans/ckks-bootstrap-seeded.rplan plans/ckks-bootstrap.rplan" fheplan check plans/ckks
expect "--device=emu:1 --device=emu:2 --device=emu:4 --device=emu:8" fheplan run --device=emu:
expect "cuda:0 cuda:1 cuda:2 cuda:3" fheplan check --min-budget cuda:
expect "cuda:0=16GiB cuda:0=1GiB cuda:0=256MiB cuda:0=4GiB" fheplan check --budget cuda:0=
# every option offered is one the binary takes (usage errors exit 64 and name the option)
for cmd in check run compile disasm fmt; do
    for o in $(complete_line fheplan "$cmd" -); do
        out=$("$BUILD/fheplan" "$cmd" "$o" 2>&1)
        case $out in *"unknown option"*) bad "fheplan $cmd offers $o, which fheplan refuses" ;; esac
    done
done
# and every option the usage texts name (the full one and each subcommand's --help) is offered
for cmd in check run compile disasm fmt; do
    offered=" $(complete_line fheplan "$cmd" -) "
    for o in $({ "$BUILD/fheplan" --help; "$BUILD/fheplan" "$cmd" --help; } |
        awk -v cmd="$cmd" 'match($0, /fheplan [a-z-]+/) { cur = substr($0, RSTART + 8, RLENGTH - 8) }
                           cur == cmd' | grep -o -- '--[a-z-]*\| -w\| -o' | sort -u); do
        [[ $offered == *" $o "* ]] || bad "fheplan $cmd: $o is in the usage but not completed"
    done
done
python3 tests/tools/completion_pty.py || fail=1
# zsh and fish: they parse, and offer every option the bash completion offers
if command -v zsh >/dev/null; then
    zsh -n editors/zsh/_fheplan || bad "editors/zsh/_fheplan does not parse"
else
    bad "zsh is not installed (make deps)"
fi
if command -v fish >/dev/null; then
    fish -n editors/fish/fheplan.fish || bad "editors/fish/fheplan.fish does not parse"
else
    bad "fish is not installed (make deps)"
fi
# every option the bash completion offers, zsh's names in an _arguments spec and fish
# completes (fish answers `complete -C LINE` itself)
fish_complete() { fish --no-config -c "source editors/fish/fheplan.fish; complete -C '$*'" | cut -f1 | sort | tr '\n' ' ' | sed 's/ $//'; }
for cmd in check run compile disasm fmt; do
    fopts=" $(fish_complete fheplan "$cmd" -) $(fish_complete fheplan "$cmd" --) "
    for o in $(complete_line fheplan "$cmd" -); do
        grep -Eq -- "[')}*]$o[=+[]" editors/zsh/_fheplan || bad "zsh: fheplan $cmd lacks $o"
        [[ $fopts == *" $o "* ]] || bad "fish: fheplan $cmd lacks $o (fish offers$fopts)"
    done
done
fexpect() { # want, line
    local got
    got=$(fish_complete "$2")
    [[ $got == "$1" ]] || bad "fish '$2': got '$got', want '$1'"
}
fexpect "emu:1 emu:2 emu:4 emu:8" "fheplan run --device emu:"
fexpect "cuda:0=16GiB cuda:0=1GiB cuda:0=256MiB cuda:0=4GiB" "fheplan check --budget cuda:0="
fexpect "cuda:0 cuda:1 cuda:2 cuda:3" "fheplan check --min-budget cuda:"
fexpect "auto bytes time" "fheplan run --objective "
[ $fail -eq 0 ] && echo "test-completion: ok"
exit $fail
