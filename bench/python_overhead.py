#!/usr/bin/env python3
"""What the Python binding costs per call: the median time of a manager call made from
Python against the same call made from C (fheplan._fheplan._c_timing), and per plan run:
fheplan.Runner.run and fheplan.run against the same plan run from C
(fheplan._fheplan._c_run_timing), in one process on the emulated device. Run:
PYTHONPATH=build/python python3 bench/python_overhead.py (FHEPLAN_DEVICE=cuda on a GPU
host; the manager calls measured touch no device memory)."""

import os
import statistics
import sys
import time

import numpy as np

import fheplan
from fheplan import PAGEABLE_HOST, ResidencyManager

BATCHES, PER = 101, 2000
RUNS = int(os.environ.get("FHEPLAN_BENCH_RUNS", "101"))

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
    m = ResidencyManager(device=os.environ.get("FHEPLAN_DEVICE", "emu"))
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
    runs(os.environ.get("FHEPLAN_DEVICE", "emu"))


def run_median(fn):
    fn()
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times)


def runs(device):
    """Per plan run: the C run with the program and backend kept, Runner.run (touch kernels;
    then with ct adopted from NumPy; then with a Python kernel that returns at once), and
    fheplan.run, which compiles and opens the backend each time, against C doing the same."""
    c_kept, c_each = fheplan._fheplan._c_run_timing(RUN_PLAN, device, RUNS)
    ct = np.zeros(1024, dtype=np.uint64)
    kw = dict(device=device, scale=1, unknown_as_touch=True)
    touch = fheplan.Runner(RUN_PLAN, **kw)
    adopted = fheplan.Runner(RUN_PLAN, values={"ct": ct}, **kw)
    pykernel = fheplan.Runner(RUN_PLAN, kernels={"mix": lambda call: None}, **kw)
    rows = [
        ("C, program and backend kept", c_kept, c_kept),
        ("Runner.run", run_median(touch.run), c_kept),
        ("Runner.run, ct adopted", run_median(adopted.run), c_kept),
        ("Runner.run, Python kernel", run_median(pykernel.run), c_kept),
        ("C, compile + open each run", c_each, c_each),
        ("fheplan.run", run_median(lambda: fheplan.run(RUN_PLAN, **kw)), c_each),
    ]
    print(f"\nper plan run (32 bodies, 8 source keys), median of {RUNS} runs")
    print(f"{'run':30} {'us':>9} {'vs C':>7} {'binding us':>11}")
    for name, t, base in rows:
        print(f"{name:30} {t / 1e3:9.1f} {t / base:7.3f} {(t - base) / 1e3:11.1f}")


if __name__ == "__main__":
    main()
