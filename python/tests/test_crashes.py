"""Ordinary Python code that once took the interpreter down, each case in a child interpreter:
the child must neither die by a signal nor hang, and must see what fheplan-python(7) promises
(an exported DLPack tensor keeps its copy protected, a view of memory that is gone raises
ResidencyLeaseError, callables given to a run are the run's for its whole length, a call
that copies from a lease keeps it from going under it).

Freed C memory is overwritten in the child (MALLOC_PERTURB_) and Python's debug allocator
checks the interpreter lock (PYTHONMALLOC=debug), so a use after free shows instead of
reading stale bytes."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

PRELUDE = """
import gc
import threading
import numpy as np
import fheplan
from fheplan import PAGEABLE_HOST, ResidencyManager, cuda_location

cuda0 = cuda_location("cuda:0")
m = ResidencyManager(device="emu")
"""

# A plan whose body calls one kernel three times, and one whose value comes from a loader.
PLAN = '''rplan 1
budget cuda:0 64 KiB
value x = 16 KiB replicable at host init synth(3)
value y = 16 KiB exclusive at pinned init synth(4)
plan "tile" {
  enter { ensure x @ cuda:0
          move y -> cuda:0 from pinned }
  body { run mix(x, y, 7)
         run mix(x, y, 8)
         run mix(x, y, 9) }
  exit { move y -> pinned from cuda:0 }
}
'''

ENGINE = '''rplan 1
budget cuda:0 48 KiB
value ct = 8 KiB exclusive at pinned init engine.ct(0)
value key = 8 KiB replicable source engine.key(1)
kernel mix cost 100 us
plan "p" { enter { move ct -> cuda:0 from pinned
                   ensure key @ cuda:0 }
           body { run mix(ct, key) } }
'''


def run_child(body: str, timeout: int = 120) -> str:
    env = dict(os.environ, PYTHONMALLOC="debug", MALLOC_PERTURB_="165", FHEPLAN_DEVICE="emu")
    code = (PRELUDE + f"PLAN = {PLAN!r}\nENGINE = {ENGINE!r}\n" + textwrap.dedent(body)
            + "\nprint('child: ok')\n")
    try:
        r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the child hung:\n{e.output!r}") from None
    if r.returncode < 0:
        name = signal.Signals(-r.returncode).name
        raise AssertionError(f"the child died by {name}:\n{r.stdout}")
    assert r.returncode == 0 and "child: ok" in r.stdout, \
        f"the child failed (exit {r.returncode}):\n{r.stdout}"
    return r.stdout


def test_a_dlpack_export_keeps_its_copy_past_the_lease() -> None:
    # crash 1: the export outlived the lease, the copy was dropped and its memory reused
    run_child("""
        n = 1 << 18
        h = m.adopt(np.arange(n, dtype=np.float64), at=PAGEABLE_HOST)
        m.ensure(h, cuda0)
        st = m.stream(cuda0)
        with m.acquire(h, at=cuda0, consumer_stream=st) as values:
            v = np.from_dlpack(values[h])
            w = np.from_dlpack(values[h]["data"])
        st.synchronize()
        m.reap()
        try:
            m.drop(h, cuda0)
            raise AssertionError("dropped a copy two live DLPack exports still read")
        except fheplan.ResidencyProtectedError as e:
            assert "2 exported" in str(e), str(e)
        assert m.is_resident(h, cuda0)
        h2 = m.adopt(np.ones(n), at=PAGEABLE_HOST)
        m.ensure(h2, cuda0)
        assert v.sum() == n * (n - 1) / 2 and w[-1] == n - 1
        del v
        gc.collect()
        try:
            m.drop(h, cuda0)
            raise AssertionError("dropped a copy a live DLPack export still reads")
        except fheplan.ResidencyProtectedError as e:
            assert "1 exported" in str(e), str(e)
        del w
        gc.collect()
        m.reap()
        m.drop(h, cuda0)  # the last export died: the copy may go
        assert not m.is_resident(h, cuda0)
    """)


def test_kernels_that_empty_their_dict_run_to_the_end() -> None:
    # crash 2: the run borrowed the callables from the dict the kernel empties
    out = run_child("""
        seen = []

        def mix(call):
            seen.append(call.args[2])
            kernels.clear()
            gc.collect()

        kernels = {"mix": mix}
        del mix
        report = fheplan.run(PLAN, device="emu", kernels=kernels)
        assert report["ok"] and seen == [7, 8, 9], seen

        def replace(call):
            kernels["mix"] = lambda c: None  # the run keeps calling the one it was given
            seen.append(call.args[2])

        kernels = {"mix": replace}
        seen.clear()
        assert fheplan.run(PLAN, device="emu", kernels=kernels)["ok"]
        assert seen == [7, 8, 9], seen
        print("kernels: ok")
    """)
    assert "kernels: ok" in out


def test_loaders_that_empty_their_dict_run_to_the_end() -> None:
    run_child("""
        def load(rec):
            loaders.clear()
            gc.collect()
            if rec.data is None:
                return rec.nbytes
            for name in rec.data.keys():
                np.asarray(rec.data[name])[:] = 3
            return None

        loaders = {"ct": load, "key": load}
        del load
        report = fheplan.run(ENGINE, device="emu", kernels={"mix": lambda c: None},
                             loaders=loaders)
        assert report["ok"]
    """)


def test_views_kept_past_a_load_or_a_kernel_call_raise() -> None:
    # crash 3: len() of a kept record answered stale data and .nbytes read freed memory
    run_child("""
        kept = {}

        def load(rec):
            if rec.data is None:
                return rec.nbytes
            kept.setdefault("record", rec)
            kept.setdefault("view", rec.data["data"])
            np.asarray(rec.data["data"])[:] = 5
            return None

        def mix(call):
            kept["values"] = call.values
            kept["field"] = call.values[0]["data"]

        report = fheplan.run(ENGINE, device="emu", kernels={"mix": mix},
                             loaders={"ct": load, "key": load})
        assert report["ok"]
        gc.collect()
        probes = {
            "len(record.data)": lambda: len(kept["record"].data),
            "record.data.keys()": lambda: kept["record"].data.keys(),
            "record.data['data']": lambda: kept["record"].data["data"],
            "view.nbytes": lambda: kept["view"].nbytes,
            "view.ptr": lambda: kept["view"].ptr,
            "view.__array_interface__": lambda: kept["view"].__array_interface__,
            "view.__dlpack__()": lambda: kept["view"].__dlpack__(),
            "len(call.values[0])": lambda: len(kept["values"][0]),
            "call.values[0].nbytes": lambda: kept["values"][0].nbytes,
            "field.nbytes": lambda: kept["field"].nbytes,
        }
        for what, probe in probes.items():
            try:
                probe()
            except fheplan.ResidencyLeaseError:
                continue
            raise AssertionError(f"{what} answered after its memory went")
        for obj in (kept["view"], kept["field"], kept["record"].data, kept["values"][0]):
            try:
                repr(obj)  # says what it was, or that it is gone, without reading freed memory
            except fheplan.ResidencyLeaseError:
                pass
    """)


def test_a_copy_from_a_lease_released_by_another_thread() -> None:
    # fheplan.to copied from the lease's memory without the lock while another thread
    # released the lease and dropped the copy. The second thread starts as the copy begins
    # (the stream object's ptr is read just before it).
    run_child("""
        n = 1 << 22
        want = np.arange(n, dtype=np.uint64)
        for it in range(3):
            h = m.adopt(want.copy(), at=PAGEABLE_HOST)
            m.ensure(h, cuda0)
            s = m.stream(cuda0)
            lease = m.acquire(h, at=cuda0, consumer_stream=s)
            val = lease[h]
            entered = threading.Event()
            out = {}

            class Signal:
                @property
                def ptr(self):
                    entered.set()
                    return s.ptr

            def copier():
                try:
                    out["value"] = fheplan.to(val, PAGEABLE_HOST, manager=m, stream=Signal())
                except fheplan.ResidencyLeaseError as e:
                    out["error"] = e

            t = threading.Thread(target=copier)
            t.start()
            entered.wait()
            try:
                lease.release()
                s.synchronize()
                m.reap()
                m.drop(h, cuda0)
            except (fheplan.ResidencyLeaseError, fheplan.ResidencyProtectedError,
                    fheplan.ResidencyReentrancyError):
                pass  # refused while the copy reads it: also right
            t.join()
            s.synchronize()  # the copy was ordered on s
            if "value" in out:
                assert np.array_equal(np.from_dlpack(out["value"]), want), it
            del val, lease, out
            gc.collect()
            s.synchronize()
            m.reap()
            m.discard(h)
    """)


def test_a_consumer_stream_added_while_another_thread_releases() -> None:
    # lease.release() freed the lease's stream views without the lock while another thread
    # appended to them (add_consumer_stream); the added stream is owned by the object given.
    run_child("""
        h = m.adopt(np.arange(4096, dtype=np.uint64), at=PAGEABLE_HOST)
        m.ensure(h, cuda0)
        streams = [m.stream(cuda0) for _ in range(32)]
        outcomes = {"added": 0, "refused": 0}
        for it in range(150):
            lease = m.acquire(h, at=cuda0, consumer_stream=streams[0])
            for s in streams[1:]:
                lease.add_consumer_stream(s)
            entered = threading.Event()

            class Signal:
                def __init__(self):
                    self.s = m.stream(cuda0)

                @property
                def ptr(self):
                    entered.set()
                    return self.s.ptr

            def adder():
                try:
                    lease.add_consumer_stream(Signal())
                    outcomes["added"] += 1
                except fheplan.ResidencyLeaseError:
                    outcomes["refused"] += 1

            t = threading.Thread(target=adder)
            t.start()
            entered.wait()
            lease.release()
            t.join()
            del lease
            gc.collect()
            for s in streams:
                s.synchronize()
            m.reap()
        assert outcomes["added"] + outcomes["refused"] == 150, outcomes
        m.drop(h, cuda0)
    """)


def test_an_application_value_forwards_without_leaking() -> None:
    # Value.keys() and friends built an argument tuple per call and never released it
    run_child("""
        import sys
        v = fheplan.to(np.arange(16, dtype=np.uint64), PAGEABLE_HOST, manager=m)
        v.keys()
        before = sys.getrefcount(())
        for _ in range(1000):
            v.keys()
            v.items()
            v.__dlpack_device__()
        after = sys.getrefcount(())
        assert after - before < 100, (before, after)
    """)


# ResidencyScope keeps its exit's error, whose __context__ is the body's exception, whose
# traceback holds the frame that holds the scope: a cycle the collector must see through
# the scope (it had no GC support, and the manager and its device lived on).
def test_a_scope_whose_body_and_exit_fail_is_collected() -> None:
    run_child("""
        import weakref
        PINNED = fheplan.PINNED_HOST
        h = m.adopt(np.arange(64, dtype=np.uint64), at=PAGEABLE_HOST)
        gone = weakref.ref(m)

        def body():
            plan = fheplan.ResidencyPlan(name="x", enter=(fheplan.EnsureResident(h, PINNED),),
                                         exit=(fheplan.DropResident(h, PINNED),))
            scope = m.scope(plan)
            try:
                with scope:
                    with m.acquire(h, at=PINNED) as values:
                        export = np.from_dlpack(values[h])  # the exit's drop is refused
                    raise ValueError("the body failed")
            except ValueError:
                pass
            assert scope.exit_error is not None, "the exit's drop was not refused"
            return export

        export = body()
        del export, m
        gc.collect()
        assert gone() is None, "the manager outlived its last user"
    """)


# fheplan.to(leased, ..., stream=s2) queues its copy on s2: s2 becomes a consumer of the
# lease, so after the release the copy's source stays protected until s2 passes the copy
# (before, a drop freed it while the copy waited on s2: a crash in about half the runs).
def test_a_copy_queued_on_another_stream_keeps_its_source() -> None:
    run_child("""
        n = 1 << 20
        want = np.arange(n, dtype=np.uint64)
        h = m.adopt(want.copy(), at=PAGEABLE_HOST)
        m.ensure(h, cuda0)
        s, s2 = m.stream(cuda0), m.stream(cuda0)
        big = m.adopt(np.ones(1 << 25, dtype=np.uint64), at=PAGEABLE_HOST)
        lease = m.acquire(h, at=cuda0, consumer_stream=s)
        m.ensure(big, cuda0, stream=s2)                         # s2 is busy for a while
        copy = fheplan.to(lease[h], PAGEABLE_HOST, stream=s2)  # queued behind that
        lease.release()
        s.synchronize()
        m.reap()
        try:
            m.drop(h, cuda0)
            other = m.adopt(np.full(n, 7, dtype=np.uint64), at=PAGEABLE_HOST)
            m.ensure(other, cuda0)
        except fheplan.ResidencyProtectedError:
            pass  # protected until the copy on s2 completes: right
        s2.synchronize()
        assert np.array_equal(np.from_dlpack(copy), want), "the copy read another value"
    """)
