"""The binding's ownership rule (python/src/core.c, fheplan-python(7) OWNERSHIP): whatever
exposes memory keeps its owner, every accessor checks that owner, exported DLPack arrays keep
their copy until they are deleted, callables are owned for the run, and a callback's
exception reaches the caller as Python users expect. Crashes of issue 40 each have a case
here that crashed (or read freed memory) before."""

import gc
import os
import signal
import subprocess
import sys
import threading
from typing import Any, Callable, Dict, List, Type

import numpy as np
import pytest

import fheplan
from fheplan import (PAGEABLE_HOST, Location, ResidencyLeaseError, ResidencyManager,
                     cuda_location)

cuda0 = cuda_location("cuda:0")

ENGINE = """rplan 1
budget cuda:0 48 KiB
value key[3] = 16 KiB replicable source engine.key(i) fields(b, a)
value ct = 8 KiB exclusive at pinned init engine.ct(0)
kernel mix cost 100 us
policy p = lookahead(cuda:0 -> pinned -> host)
for r in 0..<2 { for i in 0..<3 {
  request "use" using p { require ct @ cuda:0  require key[i] @ cuda:0
                          body { run mix(ct, key[i]) } }
} }
"""

SMALL = """rplan 1
budget cuda:0 64 KiB
value x = 16 KiB replicable at host init synth(3)
plan "tile" {
  enter { ensure x @ cuda:0 }
  body { run mix(x) }
  exit { drop x @ cuda:0 }
}
"""


def loaders_ok() -> Dict[str, Any]:
    def load(rec: Any) -> Any:
        if rec.data is None:
            return 16384 if rec.loader == "key" else 8192
        return None
    return {"key": load, "ct": load}


# ---- 1. exported DLPack arrays keep their copy ------------------------------------------


def test_an_export_kept_past_its_lease_stays_valid_and_protects_the_copy() -> None:
    m = ResidencyManager(device="emu")
    data = np.arange(1 << 12, dtype=np.float64)
    h = m.adopt(data.copy(), at=PAGEABLE_HOST)
    m.ensure(h, cuda0)
    st = m.stream(cuda0)
    with m.acquire(h, at=cuda0, consumer_stream=st) as values:
        v = np.from_dlpack(values[h])
        w = np.from_dlpack(values[h])
    st.synchronize()
    m.reap()
    with pytest.raises(fheplan.ResidencyProtectedError) as e:
        m.drop(h, cuda0)
    assert "protected by 2 exported views" in str(e.value)
    assert "deleted" in str(e.value)
    # the reproduction: other values come and go; the export still reads its copy
    h2 = m.adopt(np.ones(1 << 14), at=PAGEABLE_HOST)
    m.ensure(h2, cuda0)
    assert v.sum() == data.sum()
    del v
    gc.collect()
    with pytest.raises(fheplan.ResidencyProtectedError) as e:
        m.drop(h, cuda0)
    assert "protected by 1 exported view " in str(e.value)
    del w
    gc.collect()
    m.drop(h, cuda0)  # the last export ended: the copy is evictable again
    assert not m.is_resident(h, cuda0)


def test_reading_a_released_lease_raises_but_its_exports_do_not() -> None:
    m = ResidencyManager(device="emu")
    h = m.adopt(np.arange(64, dtype=np.int64), at=PAGEABLE_HOST)
    lease = m.acquire(h, at=PAGEABLE_HOST)
    val = lease[h]
    view = val["data"]
    arr = np.from_dlpack(view)
    lease.release()
    get: Callable[[Any], Any]
    for get in (len, repr, lambda x: x.nbytes, lambda x: x.location, lambda x: x.meta,
                lambda x: x.__dlpack_device__(), lambda x: list(x.keys())):
        with pytest.raises(ResidencyLeaseError):
            get(val)
    for get in (repr, lambda x: x.nbytes, lambda x: x.shape, lambda x: x.dtype,
                lambda x: x.ptr, lambda x: x.__array_interface__, lambda x: x.__dlpack__(),
                lambda x: x.location):
        with pytest.raises(ResidencyLeaseError):
            get(view)
    assert int(arr.sum()) == sum(range(64))


def test_a_value_with_live_exports_is_not_adopted() -> None:
    m = ResidencyManager(device="emu")
    h = m.adopt(np.arange(32, dtype=np.int64), at=PAGEABLE_HOST)
    with m.acquire(h, at=PAGEABLE_HOST) as lease:
        val = fheplan.to(lease[h], PAGEABLE_HOST)
    arr = np.from_dlpack(val)
    with pytest.raises(fheplan.ResidencyProtectedError, match="1 exported view"):
        m.adopt(val)
    assert int(arr.sum()) == sum(range(32))
    del arr
    gc.collect()
    h2 = m.adopt(val)
    with pytest.raises(ResidencyLeaseError):
        len(val)
    assert m.is_resident(h2, PAGEABLE_HOST)


# ---- 2. callables are owned for the run -----------------------------------------------


def test_a_kernel_that_clears_its_dict_does_not_crash_the_next_call() -> None:
    calls = []
    kernels: Dict[str, Any] = {}

    def mix(call: Any) -> None:
        calls.append(call.name)
        kernels.clear()        # drops the dict's reference to this very function
        gc.collect()
    kernels["mix"] = mix
    del mix
    fheplan.run(ENGINE, device="emu", kernels=kernels, loaders=loaders_ok())
    assert calls == ["mix"] * 6


def test_a_loader_that_replaces_its_dict_entries_keeps_running() -> None:
    loaders = loaders_ok()
    seen = []

    def load(rec: Any) -> Any:
        seen.append(rec.loader)
        loaders.clear()
        loaders["other"] = lambda r: None
        gc.collect()
        if rec.data is None:
            return 16384 if rec.loader == "key" else 8192
        return None
    loaders["key"] = load
    loaders["ct"] = load
    fheplan.run(ENGINE, device="emu", kernels={"mix": lambda c: None}, loaders=loaders)
    assert "key" in seen and "ct" in seen


# ---- 3. what a call hands out is valid during the call only ----------------------------


def test_a_loader_record_kept_past_the_load_raises() -> None:
    kept = []

    def load(rec: Any) -> Any:
        if rec.data is None:
            return 16384 if rec.loader == "key" else 8192
        kept.append(rec)
        return None
    fheplan.run(ENGINE, device="emu", kernels={"mix": lambda c: None},
                loaders={"key": load, "ct": load})
    rec = kept[0]
    get: Callable[[Any], Any]
    for get in (len, repr, lambda d: d.nbytes, lambda d: d["b"] if len(d) else None,
                lambda d: d.__dlpack_device__(), lambda d: list(d.items())):
        with pytest.raises(ResidencyLeaseError, match="valid during the call only"):
            get(rec.data)
    if rec.stream is not None:
        with pytest.raises(ResidencyLeaseError):
            rec.stream.ptr


def test_a_kernel_call_kept_past_the_call_raises() -> None:
    kept = []

    def mix(call: Any) -> None:
        kept.append((call, call.values[0]["data"]))
    fheplan.run(SMALL, device="emu", kernels={"mix": mix})
    call, view = kept[0]
    with pytest.raises(ResidencyLeaseError):
        len(call.values[0])
    with pytest.raises(ResidencyLeaseError):
        view.nbytes
    with pytest.raises(ResidencyLeaseError):
        call.stream.ptr
    with pytest.raises(ResidencyLeaseError):
        call.stream.synchronize()


# ---- exceptions ---------------------------------------------------------------------------


def test_a_kernel_exception_is_the_cause() -> None:
    def mix(call: Any) -> None:
        raise ValueError("bad tile")
    with pytest.raises(fheplan.ResidencyError) as e:
        fheplan.run(SMALL, device="emu", kernels={"mix": mix})
    assert isinstance(e.value.__cause__, ValueError)
    assert str(e.value.__cause__) == "bad tile"
    assert e.value.__cause__.__traceback__ is not None


def test_a_loader_exception_is_the_cause() -> None:
    def load(rec: Any) -> Any:
        if rec.data is None:
            return 16384 if rec.loader == "key" else 8192
        raise KeyError("no such key")
    with pytest.raises(fheplan.ResidencyError) as e:
        fheplan.run(ENGINE, device="emu", kernels={"mix": lambda c: None},
                    loaders={"key": load, "ct": load})
    assert isinstance(e.value.__cause__, KeyError)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_base_exceptions_propagate_unchanged(exc: Type[BaseException]) -> None:
    calls = []

    def mix(call: Any) -> None:
        calls.append(1)
        raise exc("stop")
    with pytest.raises(exc) as e:
        fheplan.run(SMALL, device="emu", kernels={"mix": mix})
    assert type(e.value) is exc
    assert calls == [1]
    # the run was stopped cleanly: the next one works
    assert fheplan.run(SMALL, device="emu", kernels={"mix": lambda c: None})["ok"]


LONG = """rplan 1
budget cuda:0 64 KiB
value x = 16 KiB replicable at host init synth(3)
for i in 0..<50000 {
  plan "tile" {
    enter { ensure x @ cuda:0 }
    body { run touch(x) }
    exit { drop x @ cuda:0 }
  }
}
plan "last" { enter { ensure x @ cuda:0 } body { run last(x) } exit { drop x @ cuda:0 } }
"""


def test_ctrl_c_stops_a_long_run(tmp_path: Any) -> None:
    """SIGINT while the run's bodies are not Python (touch): the run stops between
    instructions, before its last body (a C callable, list.append, that would record the
    call without running Python code), and KeyboardInterrupt reaches the caller."""
    plan = tmp_path / "long.rplan"
    plan.write_text(LONG)
    code = r"""
import os, signal, sys, threading, fheplan
reached = []
threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    fheplan.run(sys.argv[1], device="emu", kernels={"last": reached.append})
except KeyboardInterrupt:
    print("interrupted", len(reached))
else:
    print("ran to the end", len(reached))
"""
    out = subprocess.run([sys.executable, "-c", code, str(plan)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["interrupted", "0"]


# ---- races ----------------------------------------------------------------------------------


def test_release_while_another_thread_adds_consumer_streams() -> None:
    """lease.release takes its list of stream views under the interpreter lock while
    another thread appends to it (add_consumer_stream); every view is destroyed once."""
    m = ResidencyManager(device="emu")
    h = m.adopt(np.arange(1024, dtype=np.int64), at=PAGEABLE_HOST)
    m.ensure(h, cuda0)
    streams = [m.stream(cuda0) for _ in range(4)]
    for _ in range(50):
        lease = m.acquire(h, at=cuda0, consumer_stream=streams[0])
        stop = threading.Event()

        def adder() -> None:
            i = 0
            while not stop.is_set():
                try:
                    lease.add_consumer_stream(streams[i % 4])
                except ResidencyLeaseError:
                    return
                i += 1
        t = threading.Thread(target=adder)
        t.start()
        lease.release()
        stop.set()
        t.join()
        for s in streams:
            s.synchronize()
        m.reap()
    m.drop(h, cuda0)


def test_to_from_a_lease_another_thread_releases() -> None:
    """fheplan.to copies from a leased value without the lock; a release from another
    thread meanwhile waits for the copy (the copy stays protected by the pin and hold)."""
    m = ResidencyManager(device="emu")
    data = np.arange(1 << 16, dtype=np.int64)
    h = m.adopt(data.copy(), at=PAGEABLE_HOST)
    for _ in range(20):
        lease = m.acquire(h, at=PAGEABLE_HOST)
        val = lease[h]
        t = threading.Thread(target=lease.release)
        t.start()
        try:
            out = fheplan.to(val, PAGEABLE_HOST)
        except ResidencyLeaseError:
            out = None
        t.join()
        if out is not None:
            assert int(np.from_dlpack(out).sum()) == int(data.sum())
        assert lease.released
    assert m.snapshot()  # the manager is intact


def test_a_source_load_exception_is_the_cause_and_base_exceptions_propagate() -> None:
    m = ResidencyManager(device="emu")

    def bad(at: Location) -> None:
        raise ValueError("no bytes")
    h = m.register_source(bad, {"data": 64})
    with pytest.raises(fheplan.ResidencySourceError) as e:
        m.ensure(h, PAGEABLE_HOST)
    assert isinstance(e.value.__cause__, ValueError)

    def stop(at: Location) -> None:
        raise KeyboardInterrupt
    h2 = m.register_source(stop, {"data": 64})
    with pytest.raises(KeyboardInterrupt):
        m.ensure(h2, PAGEABLE_HOST)
    assert not m.is_resident(h2, PAGEABLE_HOST)
    m.ensure(m.adopt(np.arange(4.0)), cuda0)  # the manager goes on


def test_to_from_a_lease_inside_a_source_load_needs_no_manager_call() -> None:
    """fheplan.to pins the lease it reads (no call on the manager), so a source load may
    copy a value leased from its own manager, as fhr_manager_value_to allows."""
    m = ResidencyManager(device="emu")
    base = m.adopt(np.arange(256, dtype=np.int64), at=PAGEABLE_HOST)
    lease = m.acquire(base, at=PAGEABLE_HOST)

    def load(at: Location) -> Any:
        copy = fheplan.to(lease[base], PAGEABLE_HOST)
        return {"data": np.from_dlpack(copy).copy()}
    h = m.register_source(load, {"data": 256 * 8})
    m.ensure(h, PAGEABLE_HOST)
    lease.release()
    with m.acquire(h, at=PAGEABLE_HOST) as values:
        assert int(np.from_dlpack(values[h]).view(np.int64).sum()) == sum(range(256))


def test_an_export_inside_a_source_load_keeps_its_lease() -> None:
    """Inside a source load no hold can be taken on the manager: the export keeps its
    lease instead, whose release waits for the export's end."""
    m = ResidencyManager(device="emu")
    base = m.adopt(np.arange(256, dtype=np.int64), at=PAGEABLE_HOST)
    m.ensure(base, fheplan.PINNED_HOST)  # the host copy is not the last one
    lease = m.acquire(base, at=PAGEABLE_HOST)
    kept: List[Any] = []

    def load(at: Location) -> Any:
        arr = np.from_dlpack(lease[base])
        kept.append(arr)
        return {"data": arr.copy()}
    h = m.register_source(load, {"data": 256 * 8})
    m.ensure(h, PAGEABLE_HOST)
    lease.release()
    assert lease.released
    with pytest.raises(fheplan.ResidencyProtectedError):
        m.drop(base, PAGEABLE_HOST)  # the library's lease waits for the export
    assert int(kept[0].sum()) == sum(range(256))
    kept.clear()
    gc.collect()
    m.drop(base, PAGEABLE_HOST)
