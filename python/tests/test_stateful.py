"""Random sequences of what users do with the binding (Hypothesis' stateful testing), with the
invariants checked after every step:

- the snapshot's accounting: each location's used bytes are the sum of its copies' charges,
  and no bytes stay reserved outside a scope;
- no MUST_PRESERVE value is lost: every adopted value not discarded has a copy, and that copy
  reads the data it was adopted with;
- nothing leaks: once the test lets go, the manager is freed (and its device's threads);
- every view kept by the test (DLPack exports kept past their lease, field views, lease
  values, a loader's record, a kernel call's values) either reads the right data or raises
  ResidencyLeaseError; a NumPy array imported through DLPack must always read right.

The steps: adopt (NumPy arrays, views of views, read-only and strided arrays, several fields),
ensure, move, drop, discard, holds, acquire and release (on host and device copies, with
consumer streams, __dlpack__(stream=)), copies out of a lease (fheplan.to), scopes whose bodies raise, plans run with kernels and loaders
that empty or refill their dicts or keep what they were given, and calls from a second thread.

The sequences run in a child interpreter (a crash there fails this test with the child's
output instead of ending the suite). `make test` runs FHEPLAN_HYPOTHESIS_EXAMPLES examples
(default 50) from a fixed seed; FHEPLAN_HYPOTHESIS_EXAMPLES=2000 is a long run."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import numpy.typing as npt
import pytest

import fheplan
from fheplan import (PAGEABLE_HOST, PINNED_HOST, DropResident, EnsureResident, Location,
                     ReplicaMode, ResidencyError, ResidencyHandle, ResidencyLease,
                     ResidencyLeaseError, ResidencyManager, ResidencyPlan, Stream,
                     cuda_location)

CHILD = os.environ.get("FHEPLAN_STATEFUL_CHILD") == "1"
EXAMPLES = int(os.environ.get("FHEPLAN_HYPOTHESIS_EXAMPLES", "50"))
STEPS = int(os.environ.get("FHEPLAN_HYPOTHESIS_STEPS", "30"))

cuda0 = cuda_location("cuda:0")
LOCATIONS = (PAGEABLE_HOST, PINNED_HOST, cuda0)
Array = npt.NDArray[np.uint64]
Fields = Dict[str, Array]

# One plan with a kernel called three times and values that Python loaders fill.
PLAN = """rplan 1
budget cuda:0 64 KiB
value x = 2 KiB replicable at host init synth(3)
value ct = 1 KiB exclusive at pinned init engine.ct(0)
value key = 2 KiB replicable source engine.key(1)
plan "tile" {
  enter { ensure x @ cuda:0
          move ct -> cuda:0 from pinned
          ensure key @ cuda:0 }
  body { run mix(x, ct, 7)
         run mix(key, ct, 8)
         run mix(x, key, 9) }
  exit { move ct -> pinned from cuda:0 }
}
"""


class BodyError(Exception):
    """What a scope's body raises: it must reach the caller unchanged."""


def test_random_sequences_in_a_child() -> None:
    if CHILD:
        pytest.skip("the child runs the machine itself")
    env = dict(os.environ, FHEPLAN_STATEFUL_CHILD="1", FHEPLAN_DEVICE="emu")
    cmd = [sys.executable, "-X", "faulthandler", "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-x", __file__, "-k", "ResidencyMachine"]
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=1800)
    if r.returncode < 0:
        raise AssertionError(f"the machine's interpreter died by "
                             f"{signal.Signals(-r.returncode).name}:\n{r.stdout[-20000:]}")
    assert r.returncode == 0, f"the machine failed (exit {r.returncode}):\n{r.stdout[-20000:]}"
    assert " passed" in r.stdout, r.stdout


def fresh(n: int, seed: int) -> Array:
    return (np.arange(n, dtype=np.uint64) * np.uint64(2654435761) + np.uint64(seed))


def read(value: Any) -> Fields:
    """The fields of a leased or application value, copied out through DLPack."""
    return {f: np.array(np.from_dlpack(value[f]), copy=True) for f in value.keys()}


def same(got: Fields, want: Fields) -> bool:
    return got.keys() == want.keys() and all(np.array_equal(got[f], want[f]) for f in want)


class Kept:
    """Something the test keeps past the call that gave it: check() reads it and says
    whether it read the right data (True) or raised ResidencyLeaseError (False)."""

    def __init__(self, what: str, probe: Callable[[], Any], want: Optional[Any],
                 may_raise: bool = True) -> None:
        self.what, self.probe, self.want, self.may_raise = what, probe, want, may_raise

    def check(self) -> None:
        try:
            got = self.probe()
        except ResidencyLeaseError:
            assert self.may_raise, f"{self.what}: raised ResidencyLeaseError"
            return
        assert self.want is not None, f"{self.what}: answered after its memory went"
        if isinstance(self.want, dict):
            assert same(got, self.want), f"{self.what}: read wrong data"
        else:
            assert np.array_equal(got, self.want), f"{self.what}: read wrong data"


if CHILD:
    from hypothesis import HealthCheck, settings
    from hypothesis import strategies as st
    from hypothesis.stateful import (Bundle, RuleBasedStateMachine, initialize, invariant,
                                     multiple, precondition, rule)

    class ResidencyMachine(RuleBasedStateMachine):
        handles: Bundle[ResidencyHandle] = Bundle("handles")

        def __init__(self) -> None:
            super().__init__()
            self.m = ResidencyManager(budgets={cuda0: 96 << 10}, device="emu")
            self.streams: List[Stream] = [self.m.stream(cuda0) for _ in range(2)]
            self.want: Dict[ResidencyHandle, Fields] = {}
            self.discarded: List[ResidencyHandle] = []
            self.leases: List[Tuple[ResidencyLease, ResidencyHandle]] = []
            self.kept: List[Kept] = []
            self.runs = 0
            self.seed = 0

        # ---- adoption ---------------------------------------------------------------------

        def _adopt(self, value: Any, want: Fields, at: Location, mode: ReplicaMode
                   ) -> Optional[ResidencyHandle]:
            before = len(self.m.snapshot().values)
            try:
                h = self.m.adopt(value, at=at, replica_mode=mode)
            except (ResidencyError, TypeError, ValueError, BufferError):
                assert len(self.m.snapshot().values) == before, "a refused adopt kept a value"
                return None
            self.want[h] = want
            return h

        @initialize(target=handles)
        def first(self) -> ResidencyHandle:
            a = fresh(256, 1)
            h = self.m.adopt(a, at=PAGEABLE_HOST)
            self.want[h] = {"data": a.copy()}
            return h

        @rule(target=handles, n=st.sampled_from([16, 256, 1024]),
              shape=st.sampled_from(["array", "view of view", "read-only", "strided",
                                     "two fields", "shared storage"]),
              at=st.sampled_from(LOCATIONS), exclusive=st.booleans())
        def adopt(self, n: int, shape: str, at: Location, exclusive: bool) -> Any:
            self.seed += 1
            base = fresh(4 * n, self.seed)
            value: Any
            if shape == "array":
                value, want = base[:n], {"data": base[:n].copy()}
            elif shape == "view of view":
                inner = base[n // 2:][1:][: n]
                value, want = inner, {"data": inner.copy()}
            elif shape == "read-only":
                value = base[:n]
                value.flags.writeable = False
                want = {"data": value.copy()}
            elif shape == "strided":
                value, want = base[::2], {"data": base[::2].copy()}
            elif shape == "two fields":
                value = {"c0": base[:n], "c1": base[2 * n:3 * n]}
                want = {k: v.copy() for k, v in value.items()}
            else:
                value = fheplan.ManagedValue({"c0": base[:n], "c1": base[n // 2:n // 2 + n]})
                want = {k: v.copy() for k, v in value.fields.items()}
            mode = ReplicaMode.EXCLUSIVE if exclusive else ReplicaMode.REPLICABLE
            h = self._adopt(value, want, at, mode)
            if shape == "strided":
                assert h is None, "a strided array was adopted (a copy in disguise)"
            return h if h is not None else multiple()

        # ---- transitions --------------------------------------------------------------------

        @rule(h=handles, at=st.sampled_from(LOCATIONS))
        def ensure(self, h: ResidencyHandle, at: Location) -> None:
            try:
                self.m.ensure(h, at)
            except ResidencyError:
                return
            assert h not in self.discarded and self.m.is_resident(h, at)

        @rule(h=handles, to=st.sampled_from(LOCATIONS),
              frm=st.one_of(st.none(), st.sampled_from(LOCATIONS)))
        def move(self, h: ResidencyHandle, to: Location, frm: Optional[Location]) -> None:
            try:
                self.m.move(h, to, from_location=frm)
            except ResidencyError:
                return
            assert h not in self.discarded and self.m.is_resident(h, to)

        @rule(h=handles, at=st.sampled_from(LOCATIONS))
        def drop(self, h: ResidencyHandle, at: Location) -> None:
            try:
                self.m.drop(h, at)
            except ResidencyError:
                return
            assert not self.m.is_resident(h, at)

        @rule(h=handles)
        def discard(self, h: ResidencyHandle) -> None:
            try:
                self.m.discard(h)
            except ResidencyError:
                return
            assert h in self.want, "discarded a handle twice"
            del self.want[h]
            self.discarded.append(h)

        @rule()
        def settle(self) -> None:
            for s in self.streams:
                s.synchronize()
            self.m.reap()

        # ---- leases and views ---------------------------------------------------------------

        @rule(h=handles, at=st.sampled_from(LOCATIONS),
              keep=st.sampled_from(["nothing", "array", "field view", "value", "capsule"]),
              release=st.booleans(), extra_stream=st.booleans())
        def acquire(self, h: ResidencyHandle, at: Location, keep: str, release: bool,
                    extra_stream: bool) -> None:
            s = self.streams[0]
            try:
                lease = self.m.acquire(h, at=at, consumer_stream=s if at == cuda0 else None)
            except ResidencyError:
                return
            want = self.want[h]
            if extra_stream:
                lease.add_consumer_stream(self.streams[1])
            s.synchronize()
            value = lease[h]
            assert same(read(value), want), "a lease read wrong data"
            field = sorted(want)[0]
            if keep == "array":
                arr = np.from_dlpack(value[field])
                self.kept.append(Kept("a DLPack export kept past its lease", lambda: arr,
                                      want[field], may_raise=False))
            elif keep == "field view":
                view = value[field]
                self.kept.append(Kept("a field view", lambda: np.from_dlpack(view),
                                      want[field]))
                self.kept.append(Kept("a field view's nbytes", lambda: view.nbytes,
                                      np.asarray(want[field].nbytes)))
            elif keep == "value":
                self.kept.append(Kept("a lease value", lambda: read(value), want))
                self.kept.append(Kept("a lease value's len", lambda: len(value),
                                      np.asarray(len(want))))
            elif keep == "capsule":
                caps = value[field].__dlpack__(stream=self.streams[1].ptr)
                self.kept.append(Kept("an unconsumed capsule", lambda: caps is not None,
                                      np.asarray(True), may_raise=False))
            if release:
                lease.release()
                assert lease.released
                try:
                    lease[h]
                    raise AssertionError("a released lease gave a value")
                except ResidencyLeaseError:
                    pass
            else:
                self.leases.append((lease, h))

        @precondition(lambda self: bool(self.leases))
        @rule(i=st.integers(0, 7), stream=st.booleans())
        def release(self, i: int, stream: bool) -> None:
            lease, h = self.leases.pop(i % len(self.leases))
            if stream and not lease.released:
                lease.add_consumer_stream(self.streams[1])
            if not lease.released:
                lease.release()

        @rule(h=handles, at=st.sampled_from(LOCATIONS))
        def hold(self, h: ResidencyHandle, at: Location) -> None:
            try:
                hold = self.m.hold(h, at=at)
            except ResidencyError:
                return
            with hold:
                try:
                    self.m.drop(h, at)
                    raise AssertionError("dropped a held copy")
                except fheplan.ResidencyProtectedError:
                    pass
            assert hold.released

        @rule(h=handles, to=st.sampled_from(LOCATIONS), release_first=st.booleans())
        def copy_out(self, h: ResidencyHandle, to: Location, release_first: bool) -> None:
            """fheplan.to: an application-owned copy that outlives the lease it came from."""
            at = PAGEABLE_HOST
            try:
                lease = self.m.acquire(h, at=at)
            except ResidencyError:
                return
            s = self.streams[1]
            with lease:
                copy = fheplan.to(lease[h], to, stream=s if to == cuda0 else None)
            s.synchronize()
            want = self.want[h]
            assert same(read(copy), want), "fheplan.to copied wrong data"
            self.kept.append(Kept("a copy made by fheplan.to", lambda: read(copy), want,
                                  may_raise=False))

        @precondition(lambda self: bool(self.kept))
        @rule(i=st.integers(0, 7))
        def forget(self, i: int) -> None:
            del self.kept[i % len(self.kept)]
            gc.collect()

        # ---- scopes ---------------------------------------------------------------------------

        @rule(h=handles, at=st.sampled_from(LOCATIONS), keep_export=st.booleans())
        def scope_body_raises(self, h: ResidencyHandle, at: Location, keep_export: bool
                              ) -> None:
            plan = ResidencyPlan(name="body raises", enter=(EnsureResident(h, at),),
                                 exit=(DropResident(h, at),))
            scope = self.m.scope(plan)
            try:
                with scope:
                    if keep_export and at != cuda0:
                        with self.m.acquire(h, at=at) as values:
                            arr = np.from_dlpack(values[h][sorted(self.want[h])[0]])
                        self.kept.append(Kept("an export made in a scope", lambda: arr,
                                              self.want[h][sorted(self.want[h])[0]],
                                              may_raise=False))
                    raise BodyError("the body failed")
            except BodyError:
                assert scope.closed, "a scope whose body raised is still open"
            except ResidencyError:
                assert scope.closed or not scope.entered  # the entry failed

        # ---- plans --------------------------------------------------------------------------

        @precondition(lambda self: bool(self.runs < 1))
        @rule(kernel=st.sampled_from(["plain", "clear", "replace", "keep", "raise"]),
              loader=st.sampled_from(["plain", "clear", "keep"]))
        def run_plan(self, kernel: str, loader: str) -> None:
            self.runs += 1
            calls: List[int] = []
            kernels: Dict[str, Callable[[Any], object]] = {}
            loaders: Dict[str, Callable[[Any], Optional[int]]] = {}

            def mix(call: Any) -> None:
                calls.append(call.args[2])
                call.stream.synchronize()
                for v in call.values:
                    assert len(v) >= 1 and all(np.from_dlpack(v[f]).size for f in v.keys())
                if kernel == "clear":
                    kernels.clear()
                    gc.collect()
                elif kernel == "replace":
                    kernels["mix"] = lambda c: None
                elif kernel == "keep":
                    vals, fld = call.values, call.values[0][call.values[0].keys()[0]]
                    self.kept.append(Kept("a kernel call's values", lambda: len(vals[0]), None))
                    self.kept.append(Kept("a kernel call's field", lambda: fld.nbytes, None))
                elif kernel == "raise":
                    raise RuntimeError("the kernel failed")

            def load(rec: Any) -> Optional[int]:
                if loader == "clear":
                    loaders.clear()
                    gc.collect()
                if rec.data is None:
                    return int(rec.nbytes)
                for f in rec.data.keys():
                    np.asarray(rec.data[f]).view(np.uint8)[:] = 5
                if loader == "keep":
                    data, fld = rec.data, rec.data[rec.data.keys()[0]]
                    self.kept.append(Kept("a loader's record", lambda: len(data), None))
                    self.kept.append(Kept("a loader's field", lambda: fld.nbytes, None))
                return None

            kernels["mix"] = mix
            loaders["ct"] = loaders["key"] = load
            try:
                report = fheplan.run(PLAN, device="emu", kernels=kernels, loaders=loaders)
            except ResidencyError as e:
                assert kernel == "raise", f"the run failed: {e}"
                assert isinstance(e.__cause__, RuntimeError), "the kernel's error is not the cause"
                return
            assert kernel != "raise", "a kernel's exception was lost"
            assert report["ok"] and calls == [7, 8, 9], calls

        # ---- a second thread ------------------------------------------------------------------

        @rule(h=handles, g=handles, at=st.sampled_from(LOCATIONS),
              op=st.sampled_from(["ensure", "drop", "read", "snapshot"]))
        def two_threads(self, h: ResidencyHandle, g: ResidencyHandle, at: Location,
                        op: str) -> None:
            errors: List[BaseException] = []
            stream = self.m.stream(cuda0)

            def work(x: ResidencyHandle) -> None:
                try:
                    for _ in range(3):
                        try:
                            if op == "ensure":
                                self.m.ensure(x, at)
                            elif op == "drop":
                                self.m.drop(x, at)
                            elif op == "snapshot":
                                self.m.snapshot()
                            else:
                                with self.m.acquire(x, at=at, consumer_stream=stream
                                                    if at == cuda0 else None) as values:
                                    stream.synchronize()
                                    assert same(read(values[x]), self.want[x]), "read wrong"
                        except ResidencyError:
                            pass
                except BaseException as e:  # reported below
                    errors.append(e)

            t = threading.Thread(target=work, args=(g,))
            t.start()
            work(h)
            t.join()
            stream.synchronize()
            assert not errors, errors

        # ---- invariants ---------------------------------------------------------------------

        @invariant()
        def accounting_is_exact(self) -> None:
            snap = self.m.snapshot()
            for loc, stats in snap.locations.items():
                charged = sum(c.charged_nbytes for v in snap.values.values()
                              for where, c in v.materializations.items() if where == loc)
                assert stats.used_bytes == charged, (loc, stats.used_bytes, charged)
                assert stats.reserved_bytes == 0, (loc, stats.reserved_bytes)
            assert set(snap.values) == set(self.want), "the values are not those adopted"

        @invariant()
        def no_value_is_lost(self) -> None:
            snap = self.m.snapshot()
            for h, want in self.want.items():
                copies = snap.values[h].materializations  # ready or still arriving
                assert copies, f"{h} has no copy left"
                at = min(copies, key=lambda loc: (not copies[loc].ready, loc == cuda0))
                s = self.streams[0]
                try:
                    lease = self.m.acquire(h, at=at, consumer_stream=s if at == cuda0 else None)
                except ResidencyError as e:
                    raise AssertionError(f"{h} at {at} cannot be read: {e}") from e
                with lease:
                    s.synchronize()
                    assert same(read(lease[h]), want), f"{h} at {at} reads wrong data"

        @invariant()
        def kept_views_are_valid_or_raise(self) -> None:
            for k in self.kept:
                k.check()

        def teardown(self) -> None:
            while self.leases:
                lease, _ = self.leases.pop()
                if not lease.released:
                    lease.release()
                del lease
            self.kept.clear()
            # Hypothesis keeps some machines for its report: the manager (and the emulated
            # device's threads) must not live on with them.
            self.streams.clear()
            manager = weakref.ref(self.m)
            del self.m
            gc.collect()
            assert manager() is None, \
                "the manager outlived everything that refers to it"

    ResidencyMachine.TestCase.settings = settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, derandomize=True, database=None,
        deadline=None, suppress_health_check=list(HealthCheck), print_blob=True)
    TestResidencyMachine = ResidencyMachine.TestCase
