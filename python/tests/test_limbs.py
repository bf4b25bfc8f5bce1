"""Partial copies of limb-cut values (fhr_manager(3), "Partial copies"; rplan(5), "Limb-cut
values and levels") through the module: cut_limbs, ensure(limbs=), copy_limbs, the limbs of
actions and requirements, the snapshot's charges and cut, what a lease of a partial copy
reads, and a compiled program's limbs. limbs counts q-limbs as the C API does (a plan's
`level L` is limbs L + 1; 0: the whole value)."""

import os
from typing import Any, Dict, List, Tuple

import numpy as np
import numpy.typing as npt
import pytest

import fheplan
from fheplan import (PINNED_HOST, DeterministicTieredLRU, EnsureResident, ReplicaMode,
                     ResidencyController, ResidencyHandle, ResidencyManager, ResidencyPlan,
                     ResidencyRequest, ResidencyRequirement)

from conftest import cuda0, settle

REPO = os.environ.get("FHEPLAN_REPO", os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLES = int(os.environ.get("FHEPLAN_HYPOTHESIS_EXAMPLES", "50"))

# The test key: fields b0 a0 b1 a1 in two parts [b | a], each Q q-limbs then K special limbs
# of W 64-bit words; alpha 3, so a copy of n q-limbs holds part 1 from n = 4 on.
Q, K, W = 6, 2, 8
NAMES = ("b0", "a0", "b1", "a1")
LIMB = W * 8
FIELD = (Q + K) * LIMB
Key = Dict[str, npt.NDArray[np.uint64]]


def key_fields(nfields: int = 4, q: int = Q, k: int = K, w: int = W, seed: int = 0) -> Key:
    """Field f is a (q + k, w) array: row r holds limb r, every word distinct."""
    return {f"f{f}" if nfields != 4 else NAMES[f]:
            (np.arange((q + k) * w, dtype=np.uint64) + np.uint64(1000 * f + seed)
             ).reshape(q + k, w)
            for f in range(nfields)}


def cut_nbytes(nfields: int, q: int, k: int, parts: int, alpha: int, limb: int,
               limbs: int) -> int:
    """The bytes a device copy of `limbs` q-limbs holds (0 or q: whole), as rplan(5) and
    fhr_manager(3) define it: fields of part p with p * alpha <= limbs - 1, limbs + k
    limbs each."""
    if limbs == 0 or limbs >= q:
        return nfields * (q + k) * limb
    alpha = alpha or -(-q // parts)
    per = nfields // parts
    held = sum(1 for f in range(nfields) if (f // per) * alpha <= limbs - 1)
    return held * (limbs + k) * limb


def adopt_key(m: ResidencyManager, **kw: Any) -> Tuple[ResidencyHandle, Key]:
    fields = key_fields(**kw)
    return m.adopt(fields, at=PINNED_HOST), fields


def read_copy(m: ResidencyManager, h: ResidencyHandle) -> Key:
    """The copy at cuda:0 as NumPy arrays, read through a lease (the module's read path)."""
    s = m.stream(cuda0)
    with m.acquire(h, cuda0, consumer_stream=s) as lease:
        s.synchronize()
        out = {name: np.from_dlpack(view).copy() for name, view in lease[h].items()}
    settle(m, s)
    return out


def expect_copy(fields: Key, q: int, k: int, parts: int, alpha: int, limbs: int) -> Key:
    """What a copy of `limbs` q-limbs holds: of each held field, q-limbs 0..limbs-1 then
    its special limbs."""
    if limbs == 0 or limbs >= q:
        return dict(fields)
    alpha = alpha or -(-q // parts)
    per = len(fields) // parts
    return {name: np.concatenate((a[:limbs], a[q:]))
            for f, (name, a) in enumerate(fields.items()) if (f // per) * alpha <= limbs - 1}


def same(a: Key, b: Key) -> bool:
    return list(a) == list(b) and all(np.array_equal(a[n], b[n]) for n in a)


def charges(m: ResidencyManager) -> Tuple[int, int]:
    """cuda:0's used bytes and the sum of the charges of the copies there."""
    s = m.snapshot()
    used = s.locations[cuda0].used_bytes if cuda0 in s.locations else 0
    total = sum(v.materializations[cuda0].charged_nbytes for v in s.values.values()
                if cuda0 in v.materializations)
    return used, total


# ---- a partial copy -----------------------------------------------------------------------------


def test_a_partial_copy_holds_its_limbs_and_is_charged_them(residency: ResidencyManager) -> None:
    m = residency
    h, fields = adopt_key(m)
    assert m.snapshot().values[h].cut is None
    m.cut_limbs(h, Q, K, 2)
    cut = m.snapshot().values[h].cut
    assert cut is not None
    assert (cut.q, cut.special, cut.parts, cut.alpha, cut.nfields, cut.limb_nbytes,
            cut.regen_fields) == (Q, K, 2, 3, 4, LIMB, 0)
    m.ensure(h, cuda0, limbs=2)  # level 1: two q-limbs of part 0 (b0, a0) only
    assert m.copy_limbs(h, cuda0) == 2 and m.copy_limbs(h, PINNED_HOST) == 0
    copy = m.snapshot().values[h].materializations[cuda0]
    l2 = 2 * (2 + K) * LIMB
    assert copy.limbs == 2 and copy.charged_nbytes == l2 and copy.storage_nbytes == l2
    assert charges(m) == (l2, l2)
    got = read_copy(m, h)
    assert list(got) == ["b0", "a0"]
    assert got["b0"].shape == (2 + K, W) and got["b0"].dtype == np.uint64  # whole rows
    assert same(got, expect_copy(fields, Q, K, 2, 0, 2))
    assert m.snapshot_json()["values"][0]["copies"][1]["limbs"] == 2


def test_a_partial_field_keeps_its_rows_or_reads_as_bytes(residency: ResidencyManager) -> None:
    m = residency
    flat = {n: a.reshape(-1) for n, a in key_fields().items()}  # (Q + K) * W words
    one_row = {n: a.reshape(1, -1) for n, a in key_fields().items()}  # one row of them all
    views = {}
    for name, fields in (("flat", flat), ("one_row", one_row)):
        h = m.adopt(fields, at=PINNED_HOST)
        m.cut_limbs(h, Q, K, 2)
        m.ensure(h, cuda0, limbs=2)
        views[name] = read_copy(m, h)["a0"]
    want = np.concatenate((flat["a0"][:2 * W], flat["a0"][Q * W:]))
    assert views["flat"].dtype == np.uint64 and np.array_equal(views["flat"], want)
    # 4 limbs are not whole rows of (1, (Q + K) * W): the field reads as its bytes
    assert views["one_row"].dtype == np.uint8 and views["one_row"].shape == ((2 + K) * LIMB,)
    assert np.array_equal(views["one_row"], want.view(np.uint8))


def test_a_grow_moves_only_the_missing_limbs(residency: ResidencyManager) -> None:
    m = residency
    h, fields = adopt_key(m)
    m.cut_limbs(h, Q, K, parts=2, alpha=3)

    def ensure(limbs: int) -> int:
        report = m.execute_actions([EnsureResident(h, cuda0, limbs=limbs)])
        return int(report["totals"]["h2d"]["bytes"])

    l2, l5 = 2 * (2 + K) * LIMB, 4 * (5 + K) * LIMB
    assert ensure(2) == l2
    assert ensure(1) == 0  # a copy with as many or more is left as it is
    assert m.copy_limbs(h, cuda0) == 2
    assert ensure(5) == l5 - l2  # part 1 comes in; the held limbs are copied on the device
    assert m.copy_limbs(h, cuda0) == 5 and charges(m) == (l5, l5)
    assert same(read_copy(m, h), expect_copy(fields, Q, K, 2, 3, 5))
    m.ensure(h, cuda0)  # no limbs: the whole value
    assert m.copy_limbs(h, cuda0) == 0 and charges(m) == (4 * FIELD, 4 * FIELD)
    assert same(read_copy(m, h), fields)


def test_a_drop_of_parts_keeps_the_parts_a_use_reads(residency: ResidencyManager) -> None:
    m = residency
    h, fields = adopt_key(m)
    m.cut_limbs(h, Q, K, parts=2, alpha=3)
    m.ensure(h, cuda0, limbs=5)
    l5, p0 = 4 * (5 + K) * LIMB, 2 * (5 + K) * LIMB
    assert m.copy_parts(h, cuda0) == 2 and charges(m) == (l5, l5)
    m.drop(h, cuda0, limbs=2)  # a use of 2 q-limbs reads part 0 only
    assert (m.copy_limbs(h, cuda0), m.copy_parts(h, cuda0)) == (5, 1)
    assert charges(m) == (p0, p0)
    assert m.snapshot().values[h].materializations[cuda0].parts == 1
    assert same(read_copy(m, h), {n: a for n, a in expect_copy(fields, Q, K, 2, 3, 5).items()
                                  if n in ("b0", "a0")})
    report = m.execute_actions([EnsureResident(h, cuda0, limbs=4)])  # part 1 again
    assert int(report["totals"]["h2d"]["bytes"]) == 2 * (4 + K) * LIMB
    assert same(read_copy(m, h), expect_copy(fields, Q, K, 2, 3, 4))
    m.ensure(h, cuda0)
    assert m.copy_parts(h, cuda0) == 2 and charges(m) == (4 * FIELD, 4 * FIELD)
    m.drop(h, cuda0, limbs=2)  # a whole copy lies by parts too: it keeps every q-limb
    assert (m.copy_limbs(h, cuda0), m.copy_parts(h, cuda0)) == (Q, 1)
    assert charges(m) == (2 * FIELD, 2 * FIELD)
    with pytest.raises(fheplan.ResidencyStateError, match="keep every part"):
        m.drop(h, PINNED_HOST, limbs=2)


def test_explain_and_a_scope_count_the_partial_bytes(residency: ResidencyManager) -> None:
    m = residency
    h, fields = adopt_key(m)
    m.cut_limbs(h, Q, K, 2)
    plan = ResidencyPlan(name="level-3", enter=[EnsureResident(h, cuda0, limbs=4)])
    assert plan.enter == (EnsureResident(h, cuda0, limbs=4),)
    l4 = 4 * (4 + K) * LIMB
    assert m.explain(plan).bytes_moved == l4
    with m.scope(plan) as sc:
        pass
    assert sc.report["totals"]["h2d"]["bytes"] == l4
    assert m.copy_limbs(h, cuda0) == 4
    assert same(read_copy(m, h), expect_copy(fields, Q, K, 2, 0, 4))


def test_a_requirement_with_limbs_is_decided_and_used_at_them(residency: ResidencyManager) -> None:
    m = residency
    h, fields = adopt_key(m)
    m.cut_limbs(h, Q, K, 2)
    request = ResidencyRequest(name="ks", requirements=(ResidencyRequirement(h, cuda0, 3),))
    controller = ResidencyController(m, policy=DeterministicTieredLRU())
    decision = controller.decide(request)
    assert decision.plan.enter == (EnsureResident(h, cuda0, limbs=3),)
    assert decision.explanation.bytes_moved == 2 * (3 + K) * LIMB
    s = m.stream(cuda0)
    with controller.use(request, consumer_streams={cuda0: s}) as use:
        s.synchronize()
        v = use.value(h, cuda0)
        got = {name: np.from_dlpack(view).copy() for name, view in v.items()}
    settle(m, s)
    assert same(got, expect_copy(fields, Q, K, 2, 0, 3))
    assert m.copy_limbs(h, cuda0) == 3


def test_the_lookahead_drops_a_part_the_next_use_does_not_read(
        residency: ResidencyManager) -> None:
    m = residency
    k1, _ = adopt_key(m, seed=1)
    k2, _ = adopt_key(m, seed=2)
    for h in (k1, k2):
        m.cut_limbs(h, Q, K, parts=2, alpha=3)
    l5, p0 = 4 * (5 + K) * LIMB, 2 * (5 + K) * LIMB
    m.set_budget(cuda0, 2 * l5 - p0)
    uses = ((k1, 5), (k2, 5), (k1, 2))
    requests = [ResidencyRequest(name=f"use{i}", position=i,
                                 requirements=(ResidencyRequirement(h, cuda0, n),))
                for i, (h, n) in enumerate(uses, 1)]
    future = fheplan.lookahead_future(requests)
    assert future[2] == (3, k1, cuda0, 2)
    controller = ResidencyController(m, policy=fheplan.DeterministicLookahead(future=future))
    moved = []
    for request in requests:
        plan = controller.decide(request).plan
        if request.position == 2:  # k1's part 1 goes; k1 stays for its next use
            assert plan.reclaim == (fheplan.DropResident(k1, cuda0, limbs=2),)
        report = m.execute_actions(list(plan.reclaim) + list(plan.enter))
        moved.append(int(report["totals"]["h2d"]["bytes"]))
    assert moved == [l5, l5, 0]
    assert (m.copy_limbs(k1, cuda0), m.copy_parts(k1, cuda0)) == (5, 1)


def test_a_source_value_is_cut_and_loaded_for_its_limbs(residency: ResidencyManager) -> None:
    m = residency
    fields = key_fields(seed=7)
    loads: List[fheplan.Location] = []

    def load(at: fheplan.Location) -> Key:
        loads.append(at)
        return {n: a.copy() for n, a in fields.items()}

    h = m.register_source(load, {n: (a.shape, "uint64") for n, a in fields.items()})
    m.cut_limbs(h, Q, K, 2)
    m.ensure(h, cuda0, limbs=4)
    assert loads and m.copy_limbs(h, cuda0) == 4
    assert same(read_copy(m, h), expect_copy(fields, Q, K, 2, 0, 4))


# ---- errors -------------------------------------------------------------------------------------


def test_bad_cuts_raise_the_status_class(residency: ResidencyManager) -> None:
    m = residency
    h, _ = adopt_key(m)
    with pytest.raises(fheplan.ResidencyValueError, match="q-limbs"):
        m.cut_limbs(h, 0, K)
    with pytest.raises(fheplan.ResidencyValueError, match="dividing the fields"):
        m.cut_limbs(h, Q, K, 3)
    with pytest.raises(fheplan.ResidencyValueError, match="limbs of a multiple of 8"):
        m.cut_limbs(h, Q, K + 1)  # 8 limbs a field are not 7 of whole words
    with pytest.raises(fheplan.ResidencyValueError, match="do not cover"):
        m.cut_limbs(h, Q, K, 2, alpha=2)  # ceil(6 / 2) parts, not 2
    with pytest.raises(fheplan.ResidencyValueError, match="regenerable"):
        m.cut_limbs(h, Q, K, regen_fields=1)  # field 0 is not regenerable
    with pytest.raises(fheplan.ResidencyValueError, match="q must be in 0..4294967295"):
        m.cut_limbs(h, -1, K)
    with pytest.raises(fheplan.ResidencyValueError, match="regen_fields must be in"):
        m.cut_limbs(h, Q, K, regen_fields=1 << 64)
    with pytest.raises(TypeError, match="special must be an int"):
        m.cut_limbs(h, Q, "2")  # type: ignore[arg-type]
    assert m.snapshot().values[h].cut is None  # a refused cut changes nothing
    m.cut_limbs(h, Q, K, 2)
    with pytest.raises(fheplan.ResidencyStateError, match="cut already"):
        m.cut_limbs(h, Q, K, 2)
    x = m.adopt(key_fields(), at=PINNED_HOST, replica_mode=ReplicaMode.EXCLUSIVE)
    with pytest.raises(fheplan.ResidencyReplicaError, match="REPLICABLE"):
        m.cut_limbs(x, Q, K, 2)


def test_bad_limbs_raise_the_status_class(residency: ResidencyManager) -> None:
    m = residency
    h, _ = adopt_key(m)
    plain, _ = adopt_key(m)
    m.cut_limbs(h, Q, K, 2)
    with pytest.raises(fheplan.ResidencyValueError, match="no limb cut"):
        m.ensure(plain, cuda0, limbs=2)
    with pytest.raises(fheplan.ResidencyLocationError, match="host and pinned"):
        m.ensure(h, fheplan.PAGEABLE_HOST, limbs=2)
    with pytest.raises(fheplan.ResidencyValueError, match="the value has 6"):
        m.ensure(h, cuda0, limbs=Q + 1)
    with pytest.raises(fheplan.ResidencyValueError, match="limbs must be in 0..4294967295"):
        m.ensure(h, cuda0, limbs=-1)
    with pytest.raises(TypeError, match="limbs must be an int"):
        m.ensure(h, cuda0, limbs=2.0)  # type: ignore[arg-type]
    with pytest.raises(fheplan.ResidencyStateError, match="no copy there"):
        m.copy_limbs(h, cuda0)
    with pytest.raises(fheplan.ResidencyValueError, match="an ensure's limbs"):
        m.execute_actions([EnsureResident(h, cuda0, limbs=-2)])
    with pytest.raises(fheplan.ResidencyValueError, match="limbs must be in"):
        ResidencyRequirement(h, cuda0, limbs=-1)
    with pytest.raises(TypeError, match="limbs must be an int"):
        ResidencyRequirement(h, cuda0, limbs=True)
    with pytest.raises(fheplan.ResidencyInfeasibleError, match="7 q-limbs: the value has 6"):
        m.execute_actions([EnsureResident(h, cuda0, limbs=Q + 1)])  # refused before it runs
    m.ensure(h, cuda0, limbs=2)
    with pytest.raises(fheplan.ResidencyStateError, match="a move takes a whole copy"):
        m.move(h, fheplan.PAGEABLE_HOST, cuda0)
    assert charges(m) == (2 * (2 + K) * LIMB,) * 2


# ---- compiled programs --------------------------------------------------------------------------


def test_a_program_shows_its_cuts_and_levels() -> None:
    p = fheplan.compile(os.path.join(REPO, "tests", "plans", "ok", "limbs.rplan"))
    key, ct = p.values()
    assert (key["limb_q"], key["limb_special"], key["limb_parts"], key["limb_alpha"]) == \
        (8, 2, 2, 4)
    assert (ct["limb_q"], ct["limb_special"], ct["limb_parts"], ct["limb_alpha"]) == (0, 0, 0, 0)
    ins = p.instructions()
    # require key @ cuda:0 level L - i, i = 0..7: q-limbs 8 down to 1
    req = [x["limbs"] for x in ins if x["op"] == "require" and x["value"] == 0]
    assert req == [8, 7, 6, 5, 4, 3, 2, 1]
    assert {x["limbs"] for x in ins if x["op"] == "require" and x["value"] == 1} == {0}
    ens = [(x["limbs"], x["location"], x["line"]) for x in ins if x["op"] == "ensure"]
    assert ens == [(4, cuda0, 19), (0, cuda0, 20)]  # level 3, then the whole key
    n = 8192 * 8  # one limb: N words
    cut = p.value_cut("key", 4)
    assert cut["nbytes"] == 2 * (4 + 2) * n  # level 3: part 0 (b0, a0) only
    assert cut["fields"] == [("b0", 0, 6 * n), ("a0", 6 * n, 6 * n), ("b1", 12 * n, 0),
                             ("a1", 12 * n, 0)]
    assert p.value_cut(0, 5)["nbytes"] == 4 * (5 + 2) * n  # part 1 from 5 q-limbs on
    assert p.value_cut(0, 0)["nbytes"] == p.value_cut(0, 8)["nbytes"] == key["nbytes"]
    with pytest.raises(fheplan.ResidencyValueError, match="no cut of 2 q-limbs"):
        p.value_cut("ct", 2)
    with pytest.raises(fheplan.ResidencyValueError, match="no cut of 9 q-limbs"):
        p.value_cut("key", 9)
    with pytest.raises(fheplan.ResidencyValueError, match="no value named 'nope'"):
        p.value_cut("nope", 1)
    with pytest.raises(fheplan.ResidencyValueError, match="value must be in 0..1"):
        p.value_cut(2, 1)


# ---- a property --------------------------------------------------------------------------------


def test_random_cuts_and_levels_keep_the_charges_exact() -> None:
    """Random cuts and sequences of ensure(limbs=) and drops: each partial copy is charged
    what the cut arithmetic says, cuda:0's used bytes are the sum of its copies' charges, a
    copy's limbs only grow until it is dropped, and it reads its limbs."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    def ceil(a: int, b: int) -> int:
        return -(-a // b)

    @st.composite
    def cuts(draw: Any) -> Tuple[int, int, int, int, int, int]:
        """q, special, fields, parts, alpha (0: ceil(q / parts)) and words a limb."""
        q = draw(st.integers(1, 8))
        k = draw(st.integers(0, 3))
        nfields = draw(st.sampled_from((1, 2, 4, 6)))
        # parts divide the fields and some alpha splits q into exactly that many
        parts = draw(st.sampled_from([p for p in (1, 2, 3, 6) if nfields % p == 0 and
                                      any(ceil(q, a) == p for a in range(1, q + 1))]))
        alphas = [a for a in range(1, q + 1) if ceil(q, a) == parts]
        if ceil(q, ceil(q, parts)) == parts:
            alphas.append(0)
        return q, k, nfields, parts, draw(st.sampled_from(alphas)), draw(st.integers(1, 3))

    # a step: ensure(limbs=n) for n in 0..9 (q and over: the whole value), or -1: a drop
    steps = st.lists(st.integers(-1, 9), min_size=1, max_size=8)

    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(cut=cuts(), steps=steps)
    def prop(cut: Tuple[int, int, int, int, int, int], steps: List[int]) -> None:
        q, k, nfields, parts, alpha, words = cut
        m = ResidencyManager(device="emu")
        fields = key_fields(nfields, q, k, words)
        h = m.adopt(fields, at=PINNED_HOST)
        m.cut_limbs(h, q, k, parts, alpha)
        limb = words * 8
        have = -1  # the q-limbs of the copy at cuda:0 (0: whole); -1: no copy there
        for step in steps:
            if step == -1:
                if have >= 0:
                    m.drop(h, cuda0)
                have = -1
            else:
                ask = step if step < q else 0  # q or more q-limbs are the whole value
                m.ensure(h, cuda0, limbs=min(step, q))
                # a copy with as many q-limbs or whole stays; a smaller one grows
                have = 0 if ask == 0 or have == 0 else max(ask, have)
                assert m.copy_limbs(h, cuda0) == have
                copy = m.snapshot().values[h].materializations[cuda0]
                assert copy.limbs == have
                assert copy.charged_nbytes == cut_nbytes(nfields, q, k, parts, alpha, limb, have)
            used, total = charges(m)
            assert used == total == (cut_nbytes(nfields, q, k, parts, alpha, limb, have)
                                     if have >= 0 else 0)
        if have >= 0:
            assert same(read_copy(m, h), expect_copy(fields, q, k, parts, alpha, have))

    prop()
