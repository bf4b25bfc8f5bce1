"""The reference's examples and rules, translated (residency-lifetimes)."""

import threading
from typing import Any, Dict, List

import numpy as np
import pytest

import fheplan
from fheplan import (
    Location,
    ResidencyHandle,
    PAGEABLE_HOST,
    PINNED_HOST,
    DeterministicTieredLRU,
    DiscardValue,
    DropResident,
    EnsureResident,
    MemoryReservation,
    MoveResident,
    ReplicaMode,
    Recoverability,
    ResidencyBudgetError,
    ResidencyController,
    ResidencyManager,
    ResidencyPlan,
    ResidencyPlanExecutionError,
    ResidencyReentrancyError,
    ResidencyRequest,
    ResidencyRequirement,
    ResidencyStaleStateError,
    cuda_location,
)

from conftest import Values, array, cuda0, settle


# ---- adoption and leases ----------------------------------------------------------------------


def test_adopt_takes_the_producer_without_a_copy(residency: ResidencyManager) -> None:
    plaintext = array(1024)
    address = plaintext.ctypes.data
    expect = plaintext.copy()
    handle = residency.adopt(
        plaintext,
        at=PAGEABLE_HOST,
        replica_mode=ReplicaMode.REPLICABLE,
    )
    del plaintext
    with residency.acquire((handle,), at=PAGEABLE_HOST) as values:
        view = np.from_dlpack(values[handle])
        assert view.ctypes.data == address  # the producer's memory is the materialization
        assert values[handle]["data"].ptr == address
        assert np.array_equal(view, expect)
        assert view.dtype == np.uint64 and view.shape == (1024,)
        del view


def test_handles_are_fresh_hashable_tokens(residency: ResidencyManager) -> None:
    a = residency.adopt(array(8), at=PAGEABLE_HOST)
    b = residency.adopt(array(8), at=PAGEABLE_HOST)
    assert a != b and len({a, b, a}) == 2
    assert a.manager_id == residency.manager_id
    other = ResidencyManager(device="emu")
    with pytest.raises(fheplan.ResidencyHandleError):
        other.ensure(a, cuda0)


def test_a_value_is_a_mapping_of_fields_with_ckks_metadata(residency: ResidencyManager) -> None:
    meta = fheplan.CKKSMeta(context_id=7, level=3, scale=2.0**40, prime_ids=(0, 1, 2, 3),
                            domain="eval")
    ct = fheplan.ManagedValue({"c0": array(256, 1), "c1": array(256, 2)}, meta)
    h = residency.adopt(ct, at=PAGEABLE_HOST)
    residency.ensure(h, cuda0)
    s = residency.stream(cuda0)
    with residency.acquire(h, at=cuda0, consumer_stream=s) as values:
        s.synchronize()
        v = values[h]
        assert sorted(v.keys()) == ["c0", "c1"]
        assert np.array_equal(np.from_dlpack(v["c1"]), array(256, 2))
        assert v.meta == meta  # moving never changes the CKKS metadata
        assert v.location == cuda0
    settle(residency, s)


def test_adopt_refuses_what_it_cannot_take_without_a_copy(residency: ResidencyManager) -> None:
    strided = array(64)[::2]
    with pytest.raises(fheplan.ResidencyValueError, match="not contiguous"):
        residency.adopt(strided, at=PAGEABLE_HOST)
    with pytest.raises(TypeError, match="DLPack"):
        residency.adopt({"x": [1, 2, 3]}, at=PAGEABLE_HOST)
    assert residency.snapshot().values == {}


def test_adopt_keeps_the_producer_alive_until_the_last_copy_goes() -> None:
    import gc
    import weakref

    class Producer:
        def __init__(self, a: Any) -> None:
            self.a = a

        def __dlpack__(self, stream: Any = None) -> Any:
            return self.a.__dlpack__()

        def __dlpack_device__(self) -> Any:
            return self.a.__dlpack_device__()

    m = ResidencyManager(device="emu")
    p = Producer(array(32))
    base = weakref.ref(p)
    h = m.adopt(p, at=PAGEABLE_HOST)
    arr = weakref.ref(p.a)
    del p
    gc.collect()
    assert base() is None  # adopt keeps the DLPack export, not the wrapper
    assert arr() is not None  # ... and so the array's memory
    m.ensure(h, cuda0)
    assert arr() is not None
    m.drop(h, PAGEABLE_HOST)  # the adopted copy goes: its free is ordered after its readers
    del m  # waits for all outstanding work
    gc.collect()
    assert arr() is None  # the producer was released with its copy


# ---- lazy locations and budgets ----------------------------------------------------------------


def test_lazy_locations_and_optional_budgets() -> None:
    cuda0 = cuda_location("cuda:0")
    unbudgeted = ResidencyManager()
    budgeted = ResidencyManager(
        budgets={
            PINNED_HOST: 4 << 30,
            cuda0: 16 << 30,
        },
    )
    assert unbudgeted.snapshot().locations == {}  # locations appear on first use
    locs = budgeted.snapshot().locations
    assert locs[PINNED_HOST].budget_bytes == 4 << 30
    assert locs[cuda0].remaining_budget_bytes == 16 << 30
    h = unbudgeted.adopt(array(16), at=PAGEABLE_HOST)
    host = unbudgeted.snapshot().locations[PAGEABLE_HOST]
    assert host.budget_bytes is None and host.remaining_budget_bytes is None
    assert host.used_bytes == 128
    unbudgeted.discard(h)


def test_a_direct_transition_over_budget_raises_and_changes_nothing() -> None:
    m = ResidencyManager(budgets={cuda0: 1000})
    h = m.adopt(array(256), at=PAGEABLE_HOST)  # 2048 bytes
    before = m.snapshot()
    with pytest.raises(ResidencyBudgetError) as e:
        m.ensure(h, cuda0)
    assert e.value.location == cuda0 and e.value.bytes_short == 1048
    after = m.snapshot()
    assert after.state_version == before.state_version
    assert list(after.values[h].materializations) == [PAGEABLE_HOST]
    plan = ResidencyPlan(name="too-big", enter=(EnsureResident(h, cuda0),))
    explanation = m.explain(plan)
    assert not explanation.feasible and explanation.status == "budget"
    assert "budget" in explanation.reason


# ---- the primitives ------------------------------------------------------------------------------


def test_ensure_move_drop_discard(residency: ResidencyManager) -> None:
    m = residency
    h = m.adopt(array(64), at=PAGEABLE_HOST)
    m.ensure(h, cuda0)  # keeps the host copy, adds a device one
    assert m.is_resident(h, PAGEABLE_HOST) and m.is_resident(h, cuda0)
    m.move(h, PINNED_HOST, from_location=PAGEABLE_HOST)
    assert not m.is_resident(h, PAGEABLE_HOST) and m.is_resident(h, PINNED_HOST)
    m.drop(h, cuda0)
    assert m.snapshot().values[h].materializations.keys() == {PINNED_HOST}
    with pytest.raises(fheplan.ResidencyPreserveError):
        m.drop(h, PINNED_HOST)  # the last copy of a MUST_PRESERVE value
    m.discard(h)
    assert m.snapshot().values == {}
    with pytest.raises(fheplan.ResidencyHandleError):
        m.ensure(h, cuda0)


def test_an_exclusive_value_is_refused_by_ensure_and_moved(residency: ResidencyManager) -> None:
    m = residency
    h = m.adopt(array(64), at=PINNED_HOST, replica_mode=ReplicaMode.EXCLUSIVE)
    with pytest.raises(fheplan.ResidencyReplicaError):
        m.ensure(h, cuda0)
    m.move(h, cuda0)
    assert m.snapshot().values[h].materializations.keys() == {cuda0}
    assert m.snapshot().values[h].replica_mode == ReplicaMode.EXCLUSIVE


def test_register_source_loads_the_exact_value(residency: ResidencyManager) -> None:
    m = residency
    calls = []

    def load(at: Location) -> Any:
        calls.append(at)
        return {"b": array(128, 5), "a": array(128, 6)}

    h = m.register_source(load, fields={"b": ((128,), "uint64"), "a": ((128,), "uint64")})
    v = m.snapshot().values[h]
    assert v.recoverability == Recoverability.RECONSTRUCTIBLE and not v.materializations
    m.ensure(h, PAGEABLE_HOST)
    assert calls == [PAGEABLE_HOST]
    with m.acquire(h, at=PAGEABLE_HOST) as values:
        assert np.array_equal(np.from_dlpack(values[h]["a"]), array(128, 6))
    m.drop(h, PAGEABLE_HOST)  # reconstructible: the last copy may go
    assert not m.snapshot().values[h].materializations


def test_a_load_that_raises_fails_the_call_with_its_cause(residency: ResidencyManager) -> None:
    def load(at: Location) -> None:
        raise KeyError("no such key on disk")

    h = residency.register_source(load, fields={"x": 64})
    with pytest.raises(fheplan.ResidencySourceError) as e:
        residency.ensure(h, PAGEABLE_HOST)
    assert isinstance(e.value.__cause__, KeyError)
    assert "no such key on disk" in str(e.value)


# ---- plans and scopes --------------------------------------------------------------------------


def spec_plan(values: Values, output_and_workspace_bytes: int = 1024) -> ResidencyPlan:
    previous_weight_handle, weight_handle, input_handle = values
    return ResidencyPlan(
        name="inference/attention/tile-4",
        reclaim=(
            DropResident(previous_weight_handle, cuda0),
        ),
        enter=(
            EnsureResident(weight_handle, cuda0),
            MoveResident(input_handle, cuda0, from_location=PINNED_HOST),
        ),
        exit=(
            MoveResident(input_handle, PINNED_HOST, from_location=cuda0),
            DropResident(weight_handle, cuda0),
        ),
        reservations=(
            MemoryReservation(
                cuda0,
                output_and_workspace_bytes,
                label="attention output and native workspace",
            ),
        ),
    )


def test_the_plan_example_runs_in_its_order(residency: ResidencyManager, values: Values) -> None:
    residency.set_budget(cuda0, 2 * 4096 + 1024)  # room only once the old weight went
    plan = spec_plan(values)
    ran = []

    def run_tile() -> None:
        snap = residency.snapshot()
        ran.append(snap.locations[cuda0].reserved_bytes)
        assert snap.values[values[2]].materializations.keys() == {cuda0}

    explanation = residency.explain(plan)  # dry run; no state change
    if not explanation.feasible:
        raise RuntimeError(explanation.reason)
    assert explanation.predicted_peak_bytes[cuda0] == 2 * 4096 + 1024

    with residency.scope(plan) as scope:
        run_tile()

    assert ran == [1024]
    phases = [(t["phase"], t["action"]) for t in scope.report["transitions"]]
    assert phases == [("reclaim", "drop"), ("enter", "ensure"), ("enter", "move"),
                      ("exit", "move"), ("exit", "drop")]
    snap = residency.snapshot()
    assert snap.locations[cuda0].reserved_bytes == 0
    assert snap.locations[cuda0].peak_charged_bytes == 2 * 4096 + 1024
    assert snap.values[values[2]].materializations.keys() == {PINNED_HOST}


def test_an_infeasible_explain_says_why_and_changes_nothing(residency: ResidencyManager, values: Values) -> None:
    residency.set_budget(cuda0, 2 * 4096)
    version = residency.state_version()
    explanation = residency.explain(spec_plan(values, output_and_workspace_bytes=4096))
    assert not explanation.feasible
    assert explanation.location == cuda0 and explanation.bytes_short > 0
    assert "cuda:0" in explanation.reason
    assert residency.state_version() == version
    with pytest.raises(fheplan.ResidencyInfeasibleError, match="4096 bytes short"):
        with residency.scope(spec_plan(values, 4096)):
            pass  # preflight refuses before the first action
    assert residency.state_version() == version


def failing_source(residency: ResidencyManager, n: int = 512) -> ResidencyHandle:
    def load(at: Location) -> None:
        raise OSError("the backing store is gone")

    return residency.register_source(load, fields={"x": ((n,), "uint64")})


def test_a_failed_entry_consumes_the_scope_and_keeps_its_prefix(residency: ResidencyManager, values: Values) -> None:
    _, weight, _ = values
    broken = failing_source(residency)
    plan = ResidencyPlan(name="tile", enter=(EnsureResident(weight, cuda0),
                                              EnsureResident(broken, cuda0)))
    scope = residency.scope(plan)
    with pytest.raises(ResidencyPlanExecutionError) as e:
        with scope:
            pytest.fail("the body must not run")
    err = e.value
    assert err.phase == "enter" and err.action_index == 1
    assert err.action == EnsureResident(broken, cuda0)
    assert [t["action"] for t in err.partial_report["transitions"]] == ["ensure"]
    assert residency.is_resident(weight, cuda0)  # not rolled back
    scope.close()  # a no-op: no exit actions run
    assert scope.closed and scope.report is None
    with pytest.raises(fheplan.ResidencyScopeError):
        scope.__enter__()


def test_body_and_exit_both_fail_body_primary_exit_error_kept(residency: ResidencyManager, values: Values) -> None:
    _, weight, inp = values
    plan = spec_plan(values)
    with pytest.raises(ValueError, match="kernel failed"):
        with residency.scope(plan) as scope:
            residency.drop(weight, cuda0)  # the exit's drop will find nothing
            raise ValueError("kernel failed")
    assert isinstance(scope.exit_error, ResidencyPlanExecutionError)
    assert scope.exit_error.phase == "exit"
    assert scope.exit_error.action == DropResident(weight, cuda0)
    assert [t["action"] for t in scope.exit_error.partial_report["transitions"]][-1] == "move"
    assert scope.report is None  # published only after a successful exit
    assert residency.snapshot().locations[cuda0].reserved_bytes == 0


def test_an_exit_failure_alone_raises_plan_execution_error(residency: ResidencyManager, values: Values) -> None:
    _, weight, _ = values
    with pytest.raises(ResidencyPlanExecutionError) as e:
        with residency.scope(spec_plan(values)) as scope:
            residency.drop(weight, cuda0)
    assert e.value.phase == "exit" and e.value.action_index == 1
    assert scope.exit_error is e.value or scope.exit_error.phase == "exit"


def test_execute_actions_with_transfer_streams(residency: ResidencyManager, values: Values) -> None:
    _, weight, inp = values
    transfer = residency.stream(cuda0)
    report = residency.execute_actions(
        (EnsureResident(weight, cuda0), MoveResident(inp, cuda0)),
        transfer_streams={cuda0: transfer},
    )
    assert [t["action"] for t in report["transitions"]] == ["ensure", "move"]
    broken = failing_source(residency)
    with pytest.raises(ResidencyPlanExecutionError) as e:
        residency.execute_actions((DropResident(weight, cuda0), EnsureResident(broken, cuda0)))
    assert e.value.phase == "actions" and e.value.action == EnsureResident(broken, cuda0)
    assert len(e.value.partial_report["transitions"]) == 1
    residency.execute_actions((DiscardValue(broken),))


# ---- automation --------------------------------------------------------------------------------


def test_the_controller_example(residency: ResidencyManager) -> None:
    m = residency
    m.set_budget(cuda0, 3 * 4096)
    old = m.adopt(array(512, 9), at=PAGEABLE_HOST)
    m.ensure(old, cuda0)
    input_handle = m.adopt(array(512, 1), at=PINNED_HOST, replica_mode=ReplicaMode.EXCLUSIVE)
    weight_handle = m.adopt(array(512, 2), at=PAGEABLE_HOST)
    workspace_bytes = 4096
    compute_stream = m.stream(cuda0)
    transfer_stream = m.stream(cuda0)

    policy = DeterministicTieredLRU(
        fallback_tiers={cuda0: (PINNED_HOST, PAGEABLE_HOST)},
    )
    controller = ResidencyController(m, policy=policy)
    request = ResidencyRequest(
        name="inference/attention/tile-4",
        requirements=(
            ResidencyRequirement(input_handle, cuda0),
            ResidencyRequirement(weight_handle, cuda0),
        ),
        reservations=(
            MemoryReservation(cuda0, workspace_bytes, "workspace"),
        ),
    )

    decision = controller.decide(request)
    assert decision.evictions == (DropResident(old, cuda0),)
    assert decision.explored_states >= 1
    assert decision.explanation.predicted_peak_bytes[cuda0] == 3 * 4096
    assert decision.state_version == m.state_version()

    ran = []

    def run(a: Any, b: Any) -> None:
        compute_stream.synchronize()
        ran.append((np.from_dlpack(a)[1], np.from_dlpack(b)[1]))

    with controller.use(
        request,
        consumer_streams={cuda0: compute_stream},
        transfer_streams={cuda0: transfer_stream},
    ) as use:
        input_value = use.value(input_handle, at=cuda0)
        weight_value = use.value(weight_handle, at=cuda0)
        run(input_value, weight_value)
    assert ran == [(array(512, 1)[1], array(512, 2)[1])]
    assert use.report["evictions"] == 1
    # successful uses keep their copies cached
    assert m.is_resident(weight_handle, cuda0) and m.is_resident(input_handle, cuda0)


def test_a_stale_decision_is_refused_not_replanned(residency: ResidencyManager) -> None:
    m = residency
    h = m.adopt(array(64), at=PAGEABLE_HOST)
    other = m.adopt(array(64), at=PAGEABLE_HOST)
    controller = ResidencyController(m, policy=DeterministicTieredLRU())
    request = ResidencyRequest(name="r", requirements=(ResidencyRequirement(h, cuda0),))
    decision = controller.decide(request)
    m.ensure(other, cuda0)  # an intervening mutation
    with pytest.raises(ResidencyStaleStateError):
        with controller.use(decision, consumer_streams={cuda0: m.stream(cuda0)}):
            pytest.fail("entered a stale decision")
    assert not m.is_resident(h, cuda0)


def test_an_exclusive_value_cannot_be_required_at_two_locations(residency: ResidencyManager) -> None:
    h = residency.adopt(array(64), at=PINNED_HOST, replica_mode=ReplicaMode.EXCLUSIVE)
    controller = ResidencyController(residency)
    request = ResidencyRequest(requirements=(ResidencyRequirement(h, cuda0),
                                             ResidencyRequirement(h, PAGEABLE_HOST)))
    with pytest.raises(fheplan.ResidencyReplicaError):
        controller.decide(request)


def test_the_lookahead_policy_evicts_the_farthest_next_use(residency: ResidencyManager) -> None:
    m = residency
    m.set_budget(cuda0, 2 * 512)
    a, b, c = (m.adopt(array(64, s), at=PAGEABLE_HOST) for s in (1, 2, 3))
    reqs = [ResidencyRequest(name=f"r{i}", requirements=(ResidencyRequirement(h, cuda0),),
                             position=i + 1)
            for i, h in enumerate((a, b, c, a))]
    policy = fheplan.DeterministicLookahead(fallback_tiers={cuda0: (PAGEABLE_HOST,)},
                                            future=fheplan.lookahead_future(reqs))
    controller = ResidencyController(m, policy=policy)
    s = m.stream(cuda0)
    for r in reqs[:2]:
        with controller.use(r, consumer_streams={cuda0: s}):
            pass
        settle(m, s)
    decision = controller.decide(reqs[2])
    assert decision.evictions == (DropResident(b, cuda0),)  # a is used again, b never
    assert decision.policy == "lookahead"


# ---- reentrancy ----------------------------------------------------------------------------------


def test_reentrancy_from_inside_load(residency: ResidencyManager) -> None:
    m = residency
    seen: Dict[str, Any] = {}

    def load(at: Location) -> Any:
        with pytest.raises(ResidencyReentrancyError):
            m.snapshot()  # an observer of the same manager
        with pytest.raises(ResidencyReentrancyError):
            m.ensure(other, cuda0)  # an unrelated transition
        seen["id"] = m.manager_id  # immutable: still available
        seen["scope"] = m.scope(ResidencyPlan(name="later"))  # not entered: available
        return array(64)

    other = m.adopt(array(8), at=PAGEABLE_HOST)
    h = m.register_source(load, fields={"data": ((64,), "uint64")})
    m.ensure(h, PAGEABLE_HOST)
    assert seen["id"] == m.manager_id
    with seen["scope"]:
        pass


def test_reentrancy_holds_across_threads(residency: ResidencyManager) -> None:
    m = residency
    entered, release = threading.Event(), threading.Event()
    errors = []

    def load(at: Location) -> Any:
        entered.set()
        release.wait(60)
        return array(64)

    h = m.register_source(load, fields={"data": 512})

    def loader() -> None:
        try:
            m.ensure(h, PAGEABLE_HOST)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=loader)
    t.start()
    try:
        assert entered.wait(60)
        with pytest.raises(ResidencyReentrancyError):
            m.snapshot()
        with pytest.raises(ResidencyReentrancyError):
            m.acquire(h, at=PAGEABLE_HOST)
        assert m.manager_id  # immutable reads remain available
    finally:
        release.set()
        t.join()
    assert not errors
    assert m.is_resident(h, PAGEABLE_HOST)


# ---- leases, streams and holds --------------------------------------------------------------------


def test_a_lease_with_a_consumer_stream_and_a_hold(residency: ResidencyManager) -> None:
    m = residency
    h = m.adopt(array(256), at=PAGEABLE_HOST)
    m.ensure(h, cuda0)
    compute_stream = m.stream(cuda0)
    other_stream = m.stream(cuda0)
    with pytest.raises(fheplan.ResidencyLeaseError, match="consumer stream"):
        m.acquire(h, at=cuda0)  # CUDA acquisition requires an initial consumer stream
    with m.acquire((h,), at=cuda0, consumer_stream=compute_stream) as values:
        values.add_consumer_stream(other_stream)
        with pytest.raises(fheplan.ResidencyProtectedError):
            m.drop(h, cuda0)  # leased
    assert values.released
    with pytest.raises(fheplan.ResidencyLeaseError):
        values[h]  # a released lease exposes nothing
    with pytest.raises(fheplan.ResidencyLeaseError):
        values.add_consumer_stream(other_stream)
    assert m.snapshot().values[h].materializations[cuda0].leases == 0
    compute_stream.synchronize()
    other_stream.synchronize()
    m.reap()
    with m.hold(h, at=cuda0) as hold:
        with pytest.raises(TypeError):
            hold[h]  # type: ignore[index]  # a hold exposes no values
        assert m.snapshot().values[h].materializations[cuda0].holds == 1
        with pytest.raises(fheplan.ResidencyProtectedError):
            m.drop(h, cuda0)
    m.drop(h, cuda0)


def test_dlpack_stream_registers_the_consumer(residency: ResidencyManager) -> None:
    m = residency
    h = m.adopt(array(256), at=PAGEABLE_HOST)
    m.ensure(h, cuda0)
    s1, s2 = m.stream(cuda0), m.stream(cuda0)
    with m.acquire(h, at=cuda0, consumer_stream=s1) as values:
        capsule = values[h]["data"].__dlpack__(stream=s2.ptr)  # ordered after the value
        assert capsule is not None
        assert values[h].__dlpack_device__() == (1, 0)  # emulated device memory is host memory
        with pytest.raises(AttributeError):
            values[h]["data"].__cuda_array_interface__
        del capsule
    settle(m, s1)
    settle(m, s2)
    m.drop(h, cuda0)


def test_streams_are_taken_from_ptr_cuda_stream_or_int(residency: ResidencyManager) -> None:
    m = residency
    h = m.adopt(array(64), at=PAGEABLE_HOST)
    m.ensure(h, cuda0)
    s = m.stream(cuda0)

    class TorchLike:
        cuda_stream = s.ptr

    stream: Any
    for stream in (s, TorchLike(), s.ptr):
        with m.acquire(h, at=cuda0, consumer_stream=stream):
            pass
        settle(m, s)
    with pytest.raises(TypeError, match="cuda_stream"):
        m.acquire(h, at=cuda0, consumer_stream="stream 0")  # type: ignore[arg-type]


# ---- accounting -------------------------------------------------------------------------------------


def test_the_four_accounting_layers(residency: ResidencyManager) -> None:
    m = residency
    m.set_budget(cuda0, 1 << 20)
    backing = array(1024)  # 8 KiB
    c0, c1 = backing[:512], backing[256:768]  # two views sharing storage
    h = m.adopt(fheplan.ManagedValue({"c0": c0, "c1": c1}), at=PAGEABLE_HOST)
    v = m.snapshot().values[h]
    assert v.logical_nbytes == 2 * 4096  # declared elements, views counted each time
    assert v.storage_nbytes == 6144  # one span: the union of the views
    host = v.materializations[PAGEABLE_HOST]
    assert host.storage_nbytes == 6144 and host.charged_nbytes == 6144
    m.ensure(h, cuda0)
    dev = m.snapshot().values[h].materializations[cuda0]
    assert dev.charged_nbytes == 6144 and dev.storage_nbytes <= 6144
    plan = ResidencyPlan(name="ws", reservations=(MemoryReservation(cuda0, 10000, "ws"),))
    with m.scope(plan):
        loc = m.snapshot().locations[cuda0]
        assert loc.reserved_bytes == 10000 and loc.used_bytes == 6144
        assert loc.remaining_budget_bytes == (1 << 20) - 16144
        # reservation bytes are accounting, not an allocation
        assert loc.observation.pool_used_bytes == dev.storage_nbytes
    loc = m.snapshot().locations[cuda0]
    assert loc.peak_used_bytes == 6144 and loc.peak_charged_bytes == 16144
    assert loc.budget_bytes == 1 << 20
    assert m.snapshot().locations[PAGEABLE_HOST].budget_bytes is None


# ---- common failures -------------------------------------------------------------------------------


def test_retaining_the_adopted_value_aliases_the_managed_copy(residency: ResidencyManager) -> None:
    plaintext = array(16)
    h = residency.adopt(plaintext, at=PAGEABLE_HOST)
    plaintext[0] = 99  # unsupported: the manager's copy is this very memory
    with residency.acquire(h, at=PAGEABLE_HOST) as values:
        assert np.from_dlpack(values[h])[0] == 99


def test_a_dry_run_is_not_a_transaction(residency: ResidencyManager, values: Values) -> None:
    _, weight, _ = values
    broken = failing_source(residency)
    plan = ResidencyPlan(enter=(EnsureResident(weight, cuda0), EnsureResident(broken, cuda0)))
    assert residency.explain(plan).feasible  # the source's failure is not predictable
    with pytest.raises(ResidencyPlanExecutionError):
        residency.execute_actions(plan.enter)
    assert residency.is_resident(weight, cuda0)  # the committed prefix stays


def test_automation_neither_invents_tiers_nor_waits_for_a_lease(residency: ResidencyManager) -> None:
    m = residency
    m.set_budget(cuda0, 512)
    old = m.adopt(array(64, 1), at=PINNED_HOST, replica_mode=ReplicaMode.EXCLUSIVE)
    m.move(old, cuda0)
    new = m.adopt(array(64, 2), at=PAGEABLE_HOST)
    request = ResidencyRequest(requirements=(ResidencyRequirement(new, cuda0),))
    no_tiers = ResidencyController(m, policy=DeterministicTieredLRU())
    decision = no_tiers.decide(request)
    assert not decision.feasible  # the only copy of a MUST_PRESERVE value, no tier given
    assert "no_tier" in decision.protected[0].reasons
    tiered = ResidencyController(
        m, policy=DeterministicTieredLRU(fallback_tiers={cuda0: (PINNED_HOST,)}))
    s = m.stream(cuda0)
    with m.acquire(old, at=cuda0, consumer_stream=s):
        leased = tiered.decide(request)
        assert not leased.feasible and "leased" in leased.protected[0].reasons
    settle(m, s)
    assert tiered.decide(request).evictions == (MoveResident(old, PINNED_HOST, cuda0),)


# ---- functional movement ------------------------------------------------------------------------------


def test_to_is_a_functional_copy(residency: ResidencyManager) -> None:
    m = residency
    h = m.adopt(array(128, 4), at=PAGEABLE_HOST)
    with m.acquire(h, at=PAGEABLE_HOST) as values:
        copy = fheplan.to(values[h], cuda0)
    assert copy.location == cuda0
    assert np.array_equal(np.from_dlpack(copy), array(128, 4))
    assert copy["data"].ptr != 0
    h2 = m.adopt(copy, at=cuda0)  # an application-owned value can be adopted in turn
    assert m.snapshot().values[h2].materializations.keys() == {cuda0}
    own = fheplan.to(array(8, 1), PINNED_HOST, manager=m)
    assert np.array_equal(np.from_dlpack(own), array(8, 1))
