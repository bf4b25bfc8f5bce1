#!/usr/bin/env python3
"""The bootstrap key trace run three ways on one GPU, in one process, per batch (1, 16) and
key budget (25, 50, 100% of the 79 keys): `fheplan run --repeat` (the C VM run again), a
fheplan.Runner over the same plan text (the Python runner: compiled once, one VM run
again), and a Runner whose kernel is a Python function spinning the same GPU time on the
run's stream through PyTorch (a Python engine). Every figure is the median of REPS runs
after one warm-up run; the table gives each against the C run. The plan is
`bench/bootstrap --print-plan --spin US` (every key use one spin of US x batch
microseconds), so the hand-written streamer `bench/torch_streamer.py --spin US` on the
same trace is its peer: --streamer runs it in this process too, cell by cell, and gives
every column against it as well. The timed plan leaves out the plan's last step, a host
verify of the ciphertext after its round trip (the streamer checks nothing; ~10 ms of a
run's host time): each cell first runs the whole text once through the Runner and stops
unless that run is ok and its verify found every byte intact. Run from the repository
root on a GPU host:
  PYTHONPATH=build/python python3 bench/runner_bootstrap.py --bootstrap DIR/bootstrap \
      --fheplan DIR/fheplan [--spin 190] [--reps 5] [--streamer] [--json out.json]
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import fheplan

KEYS, KEY_BYTES, CT_BYTES, WS_BYTES = 79, 180 << 20, 45 << 20, 150 << 20


def budget(pct):
    """The key set's share plus the ciphertext and the key-switching workspace (as
    bench/bootstrap and bench/torch_streamer.py count the room)."""
    return KEYS * KEY_BYTES * pct // 100 + CT_BYTES + WS_BYTES


def plan_text(boot, batch, spin):
    return subprocess.check_output([boot, "--print-plan", "--batch", str(batch), "--spin",
                                    "%g" % spin], text=True)


CHECK = re.compile(r'^ *plan "check-ciphertext" \{ body \{ run verify\(ct\) \} \}\n', re.M)


def unchecked(text):
    """The plan without its closing verify of the ciphertext (the timed runs)."""
    out, n = CHECK.subn("", text)
    if n != 1:
        raise SystemExit("the plan has no closing 'check-ciphertext' step to leave out")
    return out


def checked_once(text, kw):
    """One Runner run of the whole text: ok, and its verify found nothing changed."""
    with fheplan.Runner(text, **kw) as r:
        rep = r.run()
    ig = rep.get("totals", {}).get("integrity", {})
    if not rep.get("ok") or not ig.get("checks") or ig.get("failures"):
        raise SystemExit("the checked run failed: %s (integrity %s)" % (rep.get("error"), ig))


class Streamer:
    """bench/torch_streamer.py's loop on the plan's key trace, in this process."""

    def __init__(self, boot, spin):
        import torch
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import torch_streamer as ts
        self.ts, self.torch, self.spin = ts, torch, spin
        out = subprocess.check_output([boot, "--key-trace"], text=True)
        trace = [int(x) for x in out.split() if x != "-"]
        index = {k: i for i, k in enumerate(sorted(set(trace)))}
        self.trace = [index[k] for k in trace]
        self.host = [torch.empty(ts.KEY_BYTES, dtype=torch.uint8, pin_memory=True)
                     for _ in index]
        self.ct_host = torch.empty(ts.CT_BYTES, dtype=torch.uint8, pin_memory=True)

    def median(self, batch, pct, reps):
        ts, torch = self.ts, self.torch
        cycles = ts.calibrate(self.spin * batch)
        room = ts.KEYS * ts.KEY_BYTES * pct // 100
        nslots = min(len(self.host), room // ts.KEY_BYTES)
        ct_dev = torch.empty(ts.CT_BYTES, dtype=torch.uint8, device="cuda")
        ws = torch.empty(ts.WS_BYTES, dtype=torch.uint8, device="cuda")
        dev = torch.empty((nslots, ts.KEY_BYTES), dtype=torch.uint8, device="cuda")
        args = (self.trace, nslots, cycles, self.host, dev, self.ct_host, ct_dev, 1)
        ts.run_once(*args)  # warm-up
        t = statistics.median(ts.run_once(*args)[0] for _ in range(reps))
        del dev, ws, ct_dev
        torch.cuda.empty_cache()
        return t


def with_python_kernel(text):
    """Each `run spin(X ns)` becomes `run pyspin(ct)`, declared with the same cost."""
    ns = re.search(r"run spin\((\d+) ns\)", text).group(1)
    body = re.sub(r"run spin\(\d+ ns\)", "run pyspin(ct)", text)
    return body.replace("rplan 1\n", "rplan 1\nkernel pyspin cost %d ns\n" % int(ns), 1), int(ns)


def c_median(cli, device, text, b, reps):
    with tempfile.NamedTemporaryFile("w", suffix=".rplan", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        out = subprocess.run([cli, "run", "--device", device, "--budget", "cuda:0=%dB" % b,
                              "--repeat", str(reps + 1), "--json", path],
                             capture_output=True, text=True, timeout=300)
        doc = json.loads(out.stdout)
        doc = doc["files"][0] if "files" in doc else doc
        return doc["repeat"]["median_s"]
    finally:
        os.unlink(path)


def runner_median(runner, reps):
    runner.run()  # the VM is made here; later runs run it again
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        r = runner.run()
        times.append(time.perf_counter() - t0)
        if not r.get("ok"):
            raise SystemExit("the Runner's run failed: %s" % r.get("message"))
    return statistics.median(times)


def spin_kernel(ns):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_streamer import calibrate
    cycles = calibrate(ns / 1e3)
    streams = {}

    def pyspin(call):
        s = streams.get(call.stream.ptr)
        if s is None:
            s = streams[call.stream.ptr] = torch.cuda.ExternalStream(call.stream.ptr)
        with torch.cuda.stream(s):
            torch.cuda._sleep(cycles)
    return pyspin


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--fheplan", required=True)
    ap.add_argument("--spin", type=float, default=190.0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--keys", default="25,50,100")
    ap.add_argument("--batch", default="16,1")
    ap.add_argument("--device", default="cuda", help="cuda, or emu to try the script")
    ap.add_argument("--no-python-kernel", action="store_true", help="leave out the PyTorch kernel")
    ap.add_argument("--streamer", action="store_true",
                    help="run the hand-written PyTorch streamer in this process too")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    peer = Streamer(a.bootstrap, a.spin) if a.streamer else None
    print("%5s %5s %10s %10s %8s %10s %8s %11s %9s %9s" % (
        "batch", "keys", "C ms", "Runner ms", "/C", "Py kern ms", "/C", "streamer ms",
        "C/str", "Run/str"))
    for batch in [int(x) for x in a.batch.split(",")]:
        whole = plan_text(a.bootstrap, batch, a.spin)
        text = unchecked(whole)
        ptext, ns = with_python_kernel(text)
        kernel = None if a.no_python_kernel else spin_kernel(ns)
        for pct in [int(x) for x in a.keys.split(",")]:
            b = budget(pct)
            kw = dict(device=a.device, budgets={"cuda:0": b})
            checked_once(whole, kw)
            c = c_median(a.fheplan, a.device, text, b, a.reps)
            with fheplan.Runner(text, **kw) as r:
                py = runner_median(r, a.reps)
            pk = float("nan")
            if kernel:
                with fheplan.Runner(ptext, kernels={"pyspin": kernel}, **kw) as r:
                    pk = runner_median(r, a.reps)
            st = peer.median(batch, pct, a.reps) if peer else float("nan")
            row = dict(batch=batch, keys_pct=pct, budget=b, c_s=c, runner_s=py, pykernel_s=pk,
                       streamer_s=st)
            rows.append(row)
            print("%5d %4d%% %10.2f %10.2f %8.3f %10.2f %8.3f %11.2f %9.3f %9.3f" % (
                batch, pct, c * 1e3, py * 1e3, py / c, pk * 1e3, pk / c, st * 1e3, c / st,
                py / st), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
