#!/usr/bin/env python3
"""What the Python binding costs per call: the median time of a manager call made from
Python against the same call made from C (fheplan._fheplan._c_timing), in one process on
the emulated device. Run: PYTHONPATH=build/python python3 bench/python_overhead.py
(FHEPLAN_DEVICE=cuda on a GPU host; the calls measured touch no device memory)."""

import os
import statistics
import sys
import time

import numpy as np

import fheplan
from fheplan import PAGEABLE_HOST, ResidencyManager

BATCHES, PER = 101, 2000


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


if __name__ == "__main__":
    main()
