#!/bin/bash
# tests/tools/completion.sh — part of `make test-editors`: editors/bash/fheplan completes
# the subcommands, each one's options (every option fheplan accepts, and only those: each
# offered option is tried against the binary), device specs, policies and plan files.
set -u
BUILD=${BUILD:-build}
source editors/bash/fheplan
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
expect "cuda:0= cuda:1= cuda:2= cuda:3=" fheplan check --budget cu
expect "plans/ckks-bootstrap-2gpu.rplan plans/ckks-bootstrap-seeded.rplan plans/ckks-bootstrap.rplan" fheplan check plans/ckks
expect "emu:1 emu:2 emu:4 emu:8" fheplan run --device=emu:
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
[ $fail -eq 0 ] && echo "test-completion: ok"
exit $fail
