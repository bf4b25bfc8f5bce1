"""fheplan.Runner: compiled once, run many times, `at LOC` values adopted from DLPack
producers without a copy (fheplan-python(7) RUNNER)."""

import gc
import weakref
from typing import Any, Dict, List

import numpy as np
import pytest

import fheplan

# acc is adopted where the kernel reads it (cuda:0: host memory on the emulated device),
# ct at pinned and moved; key is a source filled by a loader on every run
PLAN = """rplan 1
budget cuda:0 64 KiB
value acc = 4 KiB exclusive at cuda:0 init engine.acc(0)
value ct = 8 KiB exclusive at pinned init engine.ct(0)
value key = 8 KiB replicable source engine.key(1)
plan "p" {
  enter { move ct -> cuda:0 from pinned
          ensure key @ cuda:0 }
  body { run add(acc, ct, key) }
  exit { move ct -> pinned from cuda:0 }
}
"""


class Seen:
    def __init__(self) -> None:
        self.calls: List[Dict[str, Any]] = []
        self.loads = 0

    def add(self, call: Any) -> None:
        call.stream.synchronize()
        got = {}
        for name, v in zip(("acc", "ct", "key"), call.args):
            a = np.from_dlpack(v["data"])
            got[name] = (a.ctypes.data, bytes(a))
        self.calls.append(got)

    def load(self, rec: Any) -> Any:
        if rec.data is None:
            return 8192
        self.loads += 1
        np.asarray(rec.data["data"])[:] = 5
        return None


def make(seen: Seen, **values: Any) -> fheplan.Runner:
    return fheplan.Runner(PLAN, device="emu", kernels={"add": seen.add},
                          loaders={"key": seen.load}, values=values)


def arrays() -> Dict[str, Any]:
    return {"acc": np.arange(512, dtype=np.uint64),
            "ct": np.arange(1024, dtype=np.uint64) * 3}


def test_runs_repeat_with_identical_results() -> None:
    seen = Seen()
    r = make(seen, **arrays())
    reports = [r.run() for _ in range(4)]
    assert all(rep["ok"] for rep in reports) and seen.loads == 4
    for key in ("bytes", "copies", "bodies", "requests", "plans"):
        assert all(rep["totals"][key] == reports[0]["totals"][key] for rep in reports), key
    # the bandwidth the first run probed for its report is kept, not probed again
    assert all(rep["totals"]["pinned_gbps"] == reports[0]["totals"]["pinned_gbps"]
               for rep in reports)
    contents = [{k: v[1] for k, v in c.items()} for c in seen.calls]
    assert all(c == contents[0] for c in contents) and len(contents) == 4


def test_adopted_numpy_memory_is_read_in_place() -> None:
    seen = Seen()
    a = arrays()
    r = make(seen, **a)
    assert r.values["acc"] is a["acc"] and r.values["ct"] is a["ct"]
    for i in range(3):
        a["acc"][0] = 100 + i  # a mutation between runs is what the next run reads
        a["ct"][1] = 200 + i
        r.run()
    # acc sits where the kernel runs: the kernel sees the producer's own memory
    assert [c["acc"][0] for c in seen.calls] == [a["acc"].ctypes.data] * 3
    accs = [np.frombuffer(c["acc"][1], dtype=np.uint64) for c in seen.calls]
    cts = [np.frombuffer(c["ct"][1], dtype=np.uint64) for c in seen.calls]
    assert [int(x[0]) for x in accs] == [100, 101, 102]
    assert [int(x[1]) for x in cts] == [200, 201, 202]
    assert np.array_equal(cts[2], a["ct"])


def test_the_same_values_as_a_loader_would_give() -> None:
    # fheplan.run with loaders filling acc and ct from the arrays reads the same bytes
    a = arrays()
    seen, ref = Seen(), Seen()
    make(seen, **a).run()

    def fill(rec: Any) -> Any:
        if rec.data is None:
            return rec.nbytes
        src = a[rec.value].view(np.uint8)
        np.asarray(rec.data["data"])[:] = src
        return None

    fheplan.run(PLAN, device="emu", kernels={"add": ref.add},
                loaders={"key": ref.load, "acc": fill, "ct": fill})
    assert [c["ct"][1] for c in seen.calls] == [c["ct"][1] for c in ref.calls]
    assert [c["acc"][1] for c in seen.calls] == [c["acc"][1] for c in ref.calls]


class Producer:
    """A DLPack producer over a NumPy array, which can be made to fail."""

    def __init__(self, a: Any) -> None:
        self.a = a
        self.dead = False

    def __dlpack__(self, stream: Any = None) -> Any:
        if self.dead:
            raise RuntimeError("the producer was released")
        return self.a.__dlpack__()

    def __dlpack_device__(self) -> Any:
        return self.a.__dlpack_device__()


def test_the_runner_keeps_its_producers_alive() -> None:
    seen = Seen()
    p = Producer(np.full(512, 9, dtype=np.uint64))
    alive = weakref.ref(p)
    r = make(seen, acc=p, ct=arrays()["ct"])
    del p
    gc.collect()
    assert alive() is not None
    r.run()
    assert np.frombuffer(seen.calls[0]["acc"][1], dtype=np.uint64)[0] == 9
    del r
    gc.collect()
    fheplan._fheplan._drain_releases()
    assert alive() is None


def test_a_dead_producer_fails_the_run_naming_the_value() -> None:
    seen = Seen()
    p = Producer(np.zeros(512, dtype=np.uint64))
    r = make(seen, acc=p, ct=arrays()["ct"])
    p.dead = True  # the first run imports the producers into its VM
    with pytest.raises(RuntimeError, match=r"values\['acc'\]: the producer was released"):
        r.run()
    p.dead = False  # the runner is unchanged by the failed run: the next one makes the VM
    assert r.run()["ok"] and len(seen.calls) == 1
    p.dead = True  # imported once: later runs read the memory the VM holds
    assert r.run()["ok"] and len(seen.calls) == 2


class Counting(Seen):
    def __init__(self) -> None:
        super().__init__()
        self.probes = 0
        self.fail_at = -1
        self.interrupt_at = -1

    def load(self, rec: Any) -> Any:
        if rec.data is None:
            self.probes += 1
        return super().load(rec)

    def add(self, call: Any) -> None:
        n = len(self.calls)
        self.calls.append({})
        if n == self.fail_at:
            raise ValueError("kernel failed on purpose")
        if n == self.interrupt_at:
            raise KeyboardInterrupt
        call.stream.synchronize()


def totals(rep: Dict[str, Any]) -> Any:
    t = rep["totals"]
    return [t[k] for k in ("bytes", "bytes_moved", "copies", "bodies", "plans", "requests",
                            "evictions", "peaks")]


def test_one_vm_serves_every_run_and_a_failed_run_does_not_poison_the_next() -> None:
    seen = Counting()
    r = fheplan.Runner(PLAN, device="emu", kernels={"add": seen.add},
                       loaders={"key": seen.load}, values=arrays())
    first = r.run()
    seen.fail_at = 1
    with pytest.raises(fheplan.ResidencyError) as e:
        r.run()
    assert isinstance(e.value.__cause__, ValueError)
    assert e.value.report["ok"] is False
    seen.interrupt_at = 2
    with pytest.raises(KeyboardInterrupt):  # raised unchanged, as fheplan.run does
        r.run()
    for _ in range(3):
        rep = r.run()
        assert rep["ok"] and totals(rep) == totals(first)
    assert seen.probes == 1, "the loaders' size probe runs once per Runner, not per run"
    assert seen.loads == 6 and len(seen.calls) == 6


def test_close_releases_the_vm_and_refuses_later_runs() -> None:
    seen = Seen()
    p = Producer(np.full(512, 9, dtype=np.uint64))
    alive = weakref.ref(p)
    with make(seen, acc=p, ct=arrays()["ct"]) as r:
        r.run()
        del p
        gc.collect()
        assert alive() is not None  # the Runner and its VM hold it
    fheplan._fheplan._drain_releases()
    assert alive() is None, "close() released the producer (the VM's DLPack tensor too)"
    with pytest.raises(fheplan.ResidencyStateError, match="closed"):
        r.run()
    r.close()  # idempotent
    assert r.values == {}
    with pytest.raises(fheplan.ResidencyStateError, match="closed"):
        r.program


def test_close_inside_a_run_is_refused() -> None:
    box: List[Any] = []
    seen = Seen()

    def close_me(call: Any) -> None:
        box[0].close()

    r = fheplan.Runner(PLAN, device="emu", kernels={"add": close_me},
                       loaders={"key": seen.load}, values=arrays())
    box.append(r)
    with pytest.raises(fheplan.ResidencyError) as e:
        r.run()
    assert isinstance(e.value.__cause__, fheplan.ResidencyReentrancyError)
    box.clear()
    r.close()


def test_the_collector_frees_a_runner_its_kernel_refers_to() -> None:
    seen = Seen()
    p = Producer(np.full(512, 9, dtype=np.uint64))
    alive = weakref.ref(p)
    box: List[Any] = []

    def kernel(call: Any) -> None:  # refers to the runner: a cycle through its VM
        seen.add(call)
        assert box[0] is not None

    r = fheplan.Runner(PLAN, device="emu", kernels={"add": kernel},
                       loaders={"key": seen.load}, values={"acc": p, "ct": arrays()["ct"]})
    box.append(r)
    r.run()
    del r, p, kernel, box  # the cycle alone keeps the Runner now
    gc.collect()
    fheplan._fheplan._drain_releases()
    assert alive() is None, "the cycle was collected: the Runner, its VM and the producer"


class OnDevice(Producer):
    def __dlpack_device__(self) -> Any:
        return (2, 0)  # kDLCUDA


@pytest.mark.parametrize("values,exc,words", [
    ({"acc": np.zeros(100, dtype=np.uint64)}, fheplan.ResidencyValueError,
     "values['acc']: the plan declares 4096 bytes, the array holds 800"),
    ({"ct": np.zeros(4, dtype=np.float32)}, fheplan.ResidencyValueError,
     "values['ct']: the plan declares 8192 bytes, the array holds 16"),
    ({"acc": np.zeros((64, 16), dtype=np.uint64)[:, ::2]}, fheplan.ResidencyValueError,
     "values['acc']: field 'data': it is not contiguous"),
    ({"ct": OnDevice(np.zeros(1024, dtype=np.uint64))}, fheplan.ResidencyLocationError,
     "values['ct']: field 'data': the array lives on DLPack device (2, 0), not at pinned"),
    ({"nope": np.zeros(512, dtype=np.uint64)}, fheplan.ResidencyValueError,
     "values['nope']: the plan declares no value of that name"),
    ({"key": np.zeros(1024, dtype=np.uint64)}, fheplan.ResidencyValueError,
     "values['key']: the value declared at line 5 is a source"),
    ({"acc": [1, 2]}, TypeError, "values['acc']: value must be a DLPack producer"),
    ([1], TypeError, "values must be a dict"),
])
def test_mismatched_producers_are_refused_naming_the_value(values: Any, exc: Any,
                                                            words: str) -> None:
    with pytest.raises(exc) as e:
        fheplan.Runner(PLAN, device="emu", values=values)
    assert words in str(e.value)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="kernels must be a dict"):
        fheplan.Runner(PLAN, device="emu", kernels=[1])  # type: ignore[arg-type]
    with pytest.raises(fheplan.ResidencyValueError, match="scale must be in"):
        fheplan.Runner(PLAN, device="emu", scale=0)
    with pytest.raises(fheplan.ResidencyValueError, match="policy must be"):
        fheplan.Runner(PLAN, device="emu", policy="fifo")


def test_kernels_are_taken_once_and_run_reentry_is_refused() -> None:
    seen = Seen()
    kernels = {"add": seen.add}
    box: List[Any] = []

    def again(call: Any) -> None:
        box[0].run()

    r = fheplan.Runner(PLAN, device="emu", kernels=kernels, loaders={"key": seen.load},
                       values=arrays())
    kernels["add"] = again  # the runner copied the dict
    r.run()
    assert len(seen.calls) == 1
    r2 = fheplan.Runner(PLAN, device="emu", kernels={"add": again},
                        loaders={"key": seen.load}, values=arrays())
    box.append(r2)
    with pytest.raises(fheplan.ResidencyError) as e:
        r2.run()
    assert isinstance(e.value.__cause__, fheplan.ResidencyReentrancyError)
    assert r2.program.values()[0]["name"] == "acc"
