# fish completion for fheplan(1): subcommands, each one's options and their values
# (device specs, budgets, policies, objectives, locations) and plan files. Install it as
# fheplan.fish in a folder of $fish_complete_path (make install puts it in
# $(PREFIX)/share/fish/vendor_completions.d).

set -l cmds check run compile disasm fmt help version
complete -c fheplan -f
complete -c fheplan -n "not __fish_seen_subcommand_from $cmds" -a check -d 'verify plans and predict their transfers'
complete -c fheplan -n "not __fish_seen_subcommand_from $cmds" -a run -d 'run a plan on a device'
complete -c fheplan -n "not __fish_seen_subcommand_from $cmds" -a compile -d 'write bytecode'
complete -c fheplan -n "not __fish_seen_subcommand_from $cmds" -a disasm -d 'print bytecode'
complete -c fheplan -n "not __fish_seen_subcommand_from $cmds" -a fmt -d 'format plan files'
complete -c fheplan -n "not __fish_seen_subcommand_from $cmds" -a help -d 'print the usage'
complete -c fheplan -n "not __fish_seen_subcommand_from $cmds" -a version -d 'print the version'
complete -c fheplan -n "not __fish_seen_subcommand_from $cmds" -l help -d 'print the usage'
complete -c fheplan -n "not __fish_seen_subcommand_from $cmds" -l version -d 'print the version'

# plan files: source and bytecode (fmt reads source only)
complete -c fheplan -n "__fish_seen_subcommand_from check run compile disasm" -k -a "(__fish_complete_suffix .rplan; __fish_complete_suffix .rpc)"
complete -c fheplan -n "__fish_seen_subcommand_from fmt" -k -a "(__fish_complete_suffix .rplan)"

# check and run
set -l locs host pinned cuda:0 cuda:1 cuda:2 cuda:3
function __fheplan_budget
    set -l tok (commandline -ct | string replace -r -- '^--budget=' '')
    if string match -q -- '*=*' $tok
        set -l loc (string replace -r -- '=.*' '' $tok)
        printf '%s=%s\n' $loc 256MiB $loc 1GiB $loc 4GiB $loc 16GiB
    else
        printf '%s=\n' host pinned cuda:0 cuda:1 cuda:2 cuda:3
    end
end
complete -c fheplan -n "__fish_seen_subcommand_from check run" -l budget -x -a "(__fheplan_budget)" -d 'LOC=SIZE: replace or add a budget'
complete -c fheplan -n "__fish_seen_subcommand_from check run" -l policy -x -a "tiered_lru lru lookahead as-written" -d 'replace the kind of every policy'
complete -c fheplan -n "__fish_seen_subcommand_from check run" -l objective -x -a "bytes time auto" -d 'what lookahead optimises'
complete -c fheplan -n "__fish_seen_subcommand_from check run" -l pinned-gbps -x -d 'pinned host-to-device GB/s of the model'
complete -c fheplan -n "__fish_seen_subcommand_from check run" -l peer-gbps -x -d 'device-to-device GB/s of the cost model'
complete -c fheplan -n "__fish_seen_subcommand_from check run" -l device-gbps -x -d 'device memory GB/s of the kernel model'
complete -c fheplan -n "__fish_seen_subcommand_from check run" -l gen-gbps -x -d 'generation rate of seeded fields, GB/s'
complete -c fheplan -n "__fish_seen_subcommand_from check run" -l json -d 'one JSON document on standard output'
complete -c fheplan -n "__fish_seen_subcommand_from check run" -l profile -r -k -a "(__fish_complete_suffix .json)" -d 'kernel times of an earlier run, for the model'
complete -c fheplan -n "__fish_seen_subcommand_from check run" -l quiet -d 'run: no progress or notes; check: the exit status only'

# check only
complete -c fheplan -n "__fish_seen_subcommand_from check" -l min-budget -x -a "$locs" -d 'smallest feasible budget at a location'
complete -c fheplan -n "__fish_seen_subcommand_from check" -l world-size -x -a "1 2 4 8" -d 'check every rank of a world of N'
complete -c fheplan -n "__fish_seen_subcommand_from check" -l sarif -d 'SARIF 2.1.0 on standard output'

# run only
complete -c fheplan -n "__fish_seen_subcommand_from run" -l device -x -a "auto cuda emu emu:1 emu:2 emu:4 emu:8" -d 'the device'
complete -c fheplan -n "__fish_seen_subcommand_from run" -l scale -x -a "1 2 4 8 16 32 64 128" -d 'divide every size by N'
complete -c fheplan -n "__fish_seen_subcommand_from run" -l prefetch -x -a "0 1 2 4 8" -d 'requests run ahead of the bodies'
complete -c fheplan -n "__fish_seen_subcommand_from run" -l repeat -x -a "2 5 10 20" -d 'runs on one VM, the median printed'
complete -c fheplan -n "__fish_seen_subcommand_from run" -l trace -r -k -a "(__fish_complete_suffix .json)" -d 'write a Chrome trace'
complete -c fheplan -n "__fish_seen_subcommand_from run" -l timeline -r -k -a "(__fish_complete_suffix .html)" -d 'write an HTML timeline'
complete -c fheplan -n "__fish_seen_subcommand_from run" -l profile-out -r -k -a "(__fish_complete_suffix .json)" -d 'write the kernel times measured'

# compile, disasm, fmt
complete -c fheplan -n "__fish_seen_subcommand_from compile" -s o -r -F -d 'the bytecode file to write'
complete -c fheplan -n "__fish_seen_subcommand_from disasm" -l no-source -d 'leave out the source lines'
complete -c fheplan -n "__fish_seen_subcommand_from fmt" -l check -d 'exit 1 when a file is not formatted'
complete -c fheplan -n "__fish_seen_subcommand_from fmt" -s w -d 'rewrite the files in place'

# warnings (check, run, compile): -Werror, -Wno-NAME
complete -c fheplan -n "__fish_seen_subcommand_from check run compile" -o Werror -d 'report warnings as errors'
complete -c fheplan -n "__fish_seen_subcommand_from check run compile" -o Wno-error -d 'report warnings as warnings'
for w in unused unused-constant unused-value unused-policy unused-budget
    complete -c fheplan -n "__fish_seen_subcommand_from check run compile" -o Wno-$w -d "no $w warnings"
end
