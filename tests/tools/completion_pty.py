#!/usr/bin/env python3
# tests/tools/completion_pty.py — part of `make test-editors`: editors/bash/fheplan in a
# real interactive bash on a pseudo-terminal, with bash's own COMP_WORDBREAKS (':' and
# '=' included). Each case types a line, presses TAB TAB and reads what readline lists or
# inserts; the line is then printed by a key bound to `echo [$READLINE_LINE]`.
# Usage: completion_pty.py  (from the repository root; exit 0 when every case passes)
import os
import pty
import re
import select
import sys
import time

CASES = [
    # typed text, completions listed (space separated, sorted) or None, line after TAB TAB
    ("fheplan run --device emu:", "1 2 4 8", None),
    ("fheplan run --device=emu:", "1 2 4 8", None),
    ("fheplan check --budget cuda:0=", "16GiB 1GiB 256MiB 4GiB", None),
    ("fheplan check --budget cuda:0=2", None, "fheplan check --budget cuda:0=256MiB "),
    ("fheplan check --min-budget cuda:", "0 1 2 3", None),
    ("fheplan check --min-budget cuda:2", None, "fheplan check --min-budget cuda:2 "),
    ("fheplan check --budget cu", None, "fheplan check --budget cuda:"),
    ("fheplan check --budget cuda:", "0= 1= 2= 3=", None),
    ("fheplan check --budget cuda:1", None, "fheplan check --budget cuda:1="),
    ("fheplan check --objective a", None, "fheplan check --objective auto "),
    ("fheplan run --objective ", "auto bytes time", None),
    ("fheplan check --qu", None, "fheplan check --quiet "),
]


MARK = re.compile(r"\[([^\]\n]*)\]\r?\n")


def read_until(fd, pattern, limit=60.0):
    """Output up to and including the first match of pattern (no timing assumption other
    than a generous limit for a stuck shell)."""
    out = ""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        m = pattern.search(out)
        if m:
            return out[:m.end()], m
        r, _, _ = select.select([fd], [], [], 1.0)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk.decode("utf-8", "replace")
    raise SystemExit(f"test-completion: FAIL: the shell stopped answering; last output {out!r}")


def main():
    pid, fd = pty.fork()
    if pid == 0:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TERM": "dumb",
               "HOME": os.environ.get("HOME", "/"), "PS1": "PROMPT> ", "INPUTRC": "/dev/null"}
        os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"], env)
    setup = ("bind 'set enable-bracketed-paste off'; bind 'set completion-query-items 0'; "
             "bind 'set page-completions off'; bind 'set completion-display-width 0'; "
             "bind -x '\"\\C-t\": echo \"[$READLINE_LINE]\"'; "
             "source editors/bash/fheplan; echo READY-$((6 * 7))\n")
    os.write(fd, setup.encode())
    read_until(fd, re.compile(r"READY-42"))
    os.write(fd, b"\x14")  # C-t: prints [] once the shell reads keys
    read_until(fd, re.compile(r"\[\]\r?\n"))
    fails = 0
    for typed, listed, line in CASES:
        # keys are read in order: the completions are done before C-t prints the line
        os.write(fd, typed.encode() + b"\t\t\x14")
        shown, m = read_until(fd, MARK)
        now = m.group(1)
        os.write(fd, b"\x15\x14")  # C-u clears the line; C-t shows it empty
        read_until(fd, re.compile(r"\[\]\r?\n"))
        if listed is not None:
            # the listing: lines after the typed one, other than the prompt shown again
            lines = shown[:m.start()].replace("\r", "").replace("\x07", "").split("\n")
            words = sorted(w for ln in lines[1:] if not ln.startswith("PROMPT> ")
                           for w in ln.split())
            if words != sorted(listed.split()):
                print(f"test-completion: FAIL: '{typed}' TAB TAB listed {words}, want "
                      f"{sorted(listed.split())}")
                fails += 1
        if line is not None and now != line:
            print(f"test-completion: FAIL: '{typed}' TAB TAB left the line '{now}', want '{line}'")
            fails += 1
    os.write(fd, b"exit\n")
    os.close(fd)
    os.waitpid(pid, 0)
    if not fails:
        print(f"test-completion: ok ({len(CASES)} cases in an interactive bash)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
