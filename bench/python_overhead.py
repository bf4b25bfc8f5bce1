#!/usr/bin/env python3
"""What the Python binding costs per call: the median time of a manager call made from
Python against the same call made from C (fheplan._fheplan._c_timing), and per plan run and
per request: fheplan.Runner.run (one VM run again) and fheplan.run against the same plan run
from C (fheplan._fheplan._c_run_timing), in one process. Run:
PYTHONPATH=build/python python3 bench/python_overhead.py [--device emu|cuda] (or
FHEPLAN_DEVICE; emu by default; the manager calls measured touch no device memory).
FHEPLAN_BENCH_RUNS (101) and FHEPLAN_BENCH_ROUNDS (5) set the runs per line and the rounds
they are taken in; --runs-only skips the per-call table."""

import os
import statistics
import sys
import time

import numpy as np

import fheplan
from fheplan import PAGEABLE_HOST, ResidencyManager

BATCHES, PER = 101, 2000
RUNS = int(os.environ.get("FHEPLAN_BENCH_RUNS", "101"))
ROUNDS = int(os.environ.get("FHEPLAN_BENCH_ROUNDS", "5"))

# 32 bodies over 8 keys loaded from a source and one ciphertext the engine adopts; unknown
# kernels and loaders run as touch in every column (the C run's way)
RUN_PLAN = """rplan 1
budget cuda:0 96 KiB
value key[8] = 16 KiB replicable source engine.key(i)
value ct = 8 KiB exclusive at pinned init engine.ct(0)
kernel mix cost 10 us
policy p = lookahead(cuda:0 -> pinned -> host)
for r in 0..<4 { for i in 0..<8 {
  request "use" using p { require ct @ cuda:0  require key[i] @ cuda:0
                          body { run mix(ct, key[i]) } }
} }
"""


def py_median(fn):
    times = []
    for _ in range(BATCHES):
        t0 = time.perf_counter_ns()
        for _ in range(PER):
            fn()
        times.append((time.perf_counter_ns() - t0) / PER)
    return statistics.median(times)


def main():
    args = sys.argv[1:]
    device = os.environ.get("FHEPLAN_DEVICE", "emu")
    if "--device" in args:
        device = args[args.index("--device") + 1]
    if "--runs-only" in args:
        runs(device)
        return
    m = ResidencyManager(device=device)
    h = m.adopt(np.arange(4096, dtype=np.uint64), at=PAGEABLE_HOST)

    def acquire_release():
        m.acquire(h, PAGEABLE_HOST).release()

    def acquire_with():
        with m.acquire(h, PAGEABLE_HOST) as v:
            v[h]

    cases = [
        ("ensure (resident)", "ensure", lambda: m.ensure(h, PAGEABLE_HOST)),
        ("is_resident", "is_resident", lambda: m.is_resident(h, PAGEABLE_HOST)),
        ("acquire + release", "acquire", acquire_release),
        ("with acquire, value", "acquire", acquire_with),
    ]
    print(f"fheplan {fheplan.__version__}, backend {m.backend}, Python {sys.version.split()[0]}"
          f", median of {BATCHES} batches of {PER} calls")
    print(f"{'call':22} {'C ns':>9} {'Python ns':>10} {'binding ns':>11}")
    for name, op, fn in cases:
        fn()
        c = fheplan._fheplan._c_timing(m, op, h, PAGEABLE_HOST, BATCHES, PER)
        p = py_median(fn)
        print(f"{name:22} {c:9.0f} {p:10.0f} {p - c:11.0f}")
    runs(device)


def run_median(fn, runs=RUNS):
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times)


def runs(device):
    """Per plan run and per request: Runner.run (one VM made by its first run and run again;
    touch kernels, then with ct adopted from NumPy, then with a Python kernel that returns at
    once) against C running one VM again (the 'kept' column; 'json': the same with each
    report made into JSON text, as the binding does), and fheplan.run against C compiling,
    opening and probing each run. The Runner and C medians are taken in alternating rounds
    (ROUNDS of RUNS / ROUNDS runs each) and the ratio is the median of the rounds' ratios,
    so that a change in the host's load between two columns does not read as a cost."""
    nreq = 32
    ct = np.zeros(1024, dtype=np.uint64)
    kw = dict(device=device, scale=1, unknown_as_touch=True)
    runners = [
        ("Runner.run", fheplan.Runner(RUN_PLAN, **kw)),
        ("Runner.run, ct adopted", fheplan.Runner(RUN_PLAN, values={"ct": ct}, **kw)),
        ("Runner.run, Python kernel",
         fheplan.Runner(RUN_PLAN, kernels={"mix": lambda call: None}, **kw)),
    ]
    per = max(1, RUNS // ROUNDS)
    c_kept, c_json = [], []
    py = {name: [] for name, _ in runners}
    for _ in range(ROUNDS):
        c_kept.append(fheplan._fheplan._c_run_timing(RUN_PLAN, device, per, "kept"))
        c_json.append(fheplan._fheplan._c_run_timing(RUN_PLAN, device, per, "json"))
        for name, r in runners:
            py[name].append(run_median(r.run, per))
    for _, r in runners:
        r.close()
    med = statistics.median
    rows = [("C, one VM run again", med(c_kept), 1.0),
            ("C, one VM, report as JSON", med(c_json),
             med([j / k for j, k in zip(c_json, c_kept)]))]
    for name, _ in runners:
        rows.append((name, med(py[name]), med([p / k for p, k in zip(py[name], c_kept)])))
    each_runs = max(3, RUNS // 10)
    c_each = fheplan._fheplan._c_run_timing(RUN_PLAN, device, each_runs, "each")
    py_each = run_median(lambda: fheplan.run(RUN_PLAN, **kw), each_runs)
    print(f"\nper plan run ({nreq} requests, 32 bodies, 8 source keys) on {device}: "
          f"{ROUNDS} rounds of {per} runs, medians")
    print(f"{'run':30} {'us/run':>9} {'us/request':>11} {'vs C':>7}")
    for name, t, ratio in rows:
        print(f"{name:30} {t / 1e3:9.1f} {t / nreq / 1e3:11.2f} {ratio:7.3f}")
    print(f"{'C, compile + open each run':30} {c_each / 1e3:9.1f} {c_each / nreq / 1e3:11.2f} "
          f"{1.0:7.3f}")
    print(f"{'fheplan.run':30} {py_each / 1e3:9.1f} {py_each / nreq / 1e3:11.2f} "
          f"{py_each / c_each:7.3f}")


if __name__ == "__main__":
    main()
