#!/usr/bin/env python3
"""A hand-written key streamer in PyTorch: the peer that `bench/bootstrap --spin US` is
measured against. It replays the bootstrap key trace (one key index a line, as
`bench/bootstrap --key-trace` prints it) through a fixed number of device slots, the
budget's room for keys (the same room as bench/bootstrap's yardsticks: budget less the
ciphertext and the key-switching workspace), with

  - prefetch: the loads of the next PREFETCH uses are issued on a copy stream while the
    current use runs on the compute stream (the copy stream waits for the slot's last
    reader through an event, never the host);
  - farthest-next-use eviction: a load takes the slot whose key is next used farthest
    away (never first), among keys no use between now and the load reads; ties go to the
    key read longest ago;
  - equal GPU time per use: every use is one torch.cuda._sleep of SPIN_US x batch
    microseconds, calibrated against CUDA events before timing.

Each cell reports the median of REPS runs, its own compute (the same spins without a
load, timed alone) and the bytes it moved. Run on a GPU host:
  bench/bootstrap --key-trace > keys.txt
  python3 bench/torch_streamer.py --trace keys.txt --spin 190 --json out.json
"""

import argparse
import json
import statistics
import sys
import time

import torch

KEYS = 79
KEY_BYTES = 180 << 20
CT_BYTES = 45 << 20
WS_BYTES = 150 << 20


def read_trace(path):
    keys = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and line != "-":
                keys.append(int(line))
    return keys


def calibrate(us):
    """Cycles of torch.cuda._sleep that take `us` microseconds on this GPU."""
    torch.cuda._sleep(1000000)  # warm the clocks
    torch.cuda.synchronize()
    cycles = 1000000
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        a.record()
        for _ in range(20):
            torch.cuda._sleep(cycles)
        b.record()
        b.synchronize()
        per_us = cycles * 20 / (a.elapsed_time(b) * 1e3)
        cycles = max(1, int(per_us * us))
    return cycles


def run_once(trace, nslots, cycles, host, dev, ct_host, ct_dev, prefetch):
    """One pass; returns (seconds, bytes loaded)."""
    n = len(trace)
    copy_s, comp_s = torch.cuda.Stream(), torch.cuda.Stream()
    slot_of, key_of = {}, [None] * nslots     # key -> slot, slot -> key
    free_ev = [None] * nslots                 # the slot's last reader's end
    load_ev, last_at = {}, {}                 # key -> its load's event, its last use
    loaded = 0
    loads_issued = 0                          # uses 0 .. loads_issued-1 have their key
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.cuda.stream(copy_s):
        ct_dev.copy_(ct_host, non_blocking=True)
    ct_ev = copy_s.record_event()
    comp_s.wait_event(ct_ev)

    def ensure(j, now):
        nonlocal loaded
        k = trace[j]
        if k in slot_of:
            return True
        free = [s for s in range(nslots) if key_of[s] is None]
        if free:
            s = free[0]
        else:
            # keys read by uses now..j stay; of the rest, the farthest next use goes
            keep = set(trace[now:j + 1])
            cands = [s for s in range(nslots) if key_of[s] not in keep]
            if not cands:
                return False
            s = max(cands, key=lambda s: (nxt_after(key_of[s], j), -last_at.get(key_of[s], -1)))
            del slot_of[key_of[s]]
            if free_ev[s] is not None:
                copy_s.wait_event(free_ev[s])
        with torch.cuda.stream(copy_s):
            dev[s].copy_(host[k], non_blocking=True)
        load_ev[k] = copy_s.record_event()
        slot_of[k], key_of[s] = s, k
        loaded += KEY_BYTES
        return True

    pos = {}
    for i, k in enumerate(trace):
        pos.setdefault(k, []).append(i)

    def nxt_after(k, j):
        for p in pos[k]:
            if p > j:
                return p
        return n

    for i in range(n):
        while loads_issued <= min(n - 1, i + prefetch) and ensure(loads_issued, i):
            loads_issued += 1
        if loads_issued <= i:  # no room ahead: this use's key at least
            ensure(i, i)
            loads_issued = i + 1
        k = trace[i]
        comp_s.wait_event(load_ev[k])
        with torch.cuda.stream(comp_s):
            torch.cuda._sleep(cycles)
        s = slot_of[k]
        free_ev[s] = comp_s.record_event()
        last_at[k] = i
    copy_s.wait_stream(comp_s)
    with torch.cuda.stream(copy_s):
        ct_host.copy_(ct_dev, non_blocking=True)
    torch.cuda.synchronize()
    return time.perf_counter() - t0, loaded


def compute_once(n, cycles):
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.cuda.stream(s):
        for _ in range(n):
            torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", required=True, help="key indices, one a line")
    ap.add_argument("--spin", type=float, default=190.0, help="us of GPU time per ciphertext")
    ap.add_argument("--batch", default="1,16")
    ap.add_argument("--keys", default="25,50,100", help="budget as percent of the key set")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--prefetch", type=int, default=1, help="uses ahead whose loads are issued")
    ap.add_argument("--json", help="write the rows here too")
    a = ap.parse_args()
    trace = read_trace(a.trace)
    distinct = sorted(set(trace))
    index = {k: i for i, k in enumerate(distinct)}
    trace = [index[k] for k in trace]
    host = [torch.empty(KEY_BYTES, dtype=torch.uint8, pin_memory=True) for _ in distinct]
    for i, h in enumerate(host):
        h.fill_(i & 0xFF)
    ct_host = torch.empty(CT_BYTES, dtype=torch.uint8, pin_memory=True)
    ct_dev = torch.empty(CT_BYTES, dtype=torch.uint8, device="cuda")
    ws = torch.empty(WS_BYTES, dtype=torch.uint8, device="cuda")  # held, as the plan reserves it
    rows = []
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}, {len(trace)} uses of "
          f"{len(distinct)} keys, spin {a.spin} us x batch, median of {a.reps}")
    print(f"{'keys':>4} {'batch':>5} {'slots':>5} {'time ms':>9} {'compute':>9} {'/comp':>6} "
          f"{'moved GiB':>9}")
    for batch in [int(b) for b in a.batch.split(",")]:
        cycles = calibrate(a.spin * batch)
        comp = statistics.median(compute_once(len(trace), cycles) for _ in range(a.reps))
        for pct in [int(p) for p in a.keys.split(",")]:
            budget = KEYS * KEY_BYTES * pct // 100 + CT_BYTES + WS_BYTES
            nslots = min(len(distinct), (budget - CT_BYTES - WS_BYTES) // KEY_BYTES)
            dev = torch.empty((nslots, KEY_BYTES), dtype=torch.uint8, device="cuda")
            run_once(trace, nslots, cycles, host, dev, ct_host, ct_dev, a.prefetch)  # warm-up
            res = [run_once(trace, nslots, cycles, host, dev, ct_host, ct_dev, a.prefetch)
                   for _ in range(a.reps)]
            t = statistics.median(r[0] for r in res)
            moved = res[0][1] + 2 * CT_BYTES
            print(f"{pct:3d}% {batch:5d} {nslots:5d} {t * 1e3:9.2f} {comp * 1e3:9.2f} "
                  f"{t / comp:6.3f} {moved / (1 << 30):9.2f}")
            sys.stdout.flush()
            rows.append({"key_set_pct": pct, "batch": batch, "slots": nslots, "time_s": t,
                         "compute_s": comp, "time_over_compute": t / comp, "bytes_moved": moved,
                         "times_s": [r[0] for r in res], "spin_us": a.spin,
                         "prefetch": a.prefetch})
            del dev
            torch.cuda.empty_cache()
    del ws
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
