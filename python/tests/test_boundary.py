"""Every argument is checked where it enters the binding (python/src/core.c converters): a
wrong type is a TypeError naming the parameter and the types accepted, a value out of range
a ResidencyValueError naming the parameter and the range; nothing changes on refusal. Also
the CLI's reading of plan arguments (a path or text) and its default scale."""

import os
from typing import Any, Dict, Iterable, List

import numpy as np
import pytest

import fheplan
from fheplan import (PAGEABLE_HOST, MemoryReservation, ResidencyHandle, ResidencyManager,
                     ResidencyRequest, ResidencyRequirement, ResidencyValueError, cuda_location)

cuda0 = cuda_location("cuda:0")
REPO = os.environ.get("FHEPLAN_REPO", os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture
def m() -> ResidencyManager:
    return ResidencyManager(device="emu")


@pytest.fixture
def h(m: ResidencyManager) -> ResidencyHandle:
    return m.adopt(np.arange(8.0), at=PAGEABLE_HOST)


def refused(exc: Any, words: Iterable[str], fn: Any, *args: Any, **kw: Any) -> Any:
    with pytest.raises(exc) as e:
        fn(*args, **kw)
    assert type(e.value) is exc, repr(e.value)
    text = str(e.value)
    for w in words:
        assert w in text, text
    assert "%R" not in text and "%S" not in text
    return e.value


# ---- bytes ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [-5, 2**64, -(2**70)])
def test_set_budget_refuses_bytes_out_of_range(m: ResidencyManager, bad: int) -> None:
    m.set_budget(cuda0, 1 << 20)
    refused(ResidencyValueError, ["nbytes", "0..2**64-1", str(bad)], m.set_budget, cuda0, bad)
    assert m.snapshot().locations[cuda0].budget_bytes == 1 << 20  # unchanged


def test_set_budget_takes_the_extremes(m: ResidencyManager) -> None:
    m.set_budget(cuda0, 2**64 - 1)
    m.set_budget(cuda0, 0)


def test_set_budget_refuses_non_ints(m: ResidencyManager) -> None:
    for bad in ("1 KiB", 1.5, None, True):
        refused(TypeError, ["nbytes", "int"], m.set_budget, cuda0, bad)


def test_budgets_at_construction_name_the_location(m: ResidencyManager) -> None:
    refused(ResidencyValueError, ["budgets[cuda:0]", "0..2**64-1"], ResidencyManager,
            budgets={cuda0: -1}, device="emu")
    refused(TypeError, ["budgets[cuda:0]", "int"], ResidencyManager, budgets={cuda0: "x"},
            device="emu")
    refused(TypeError, ["location"], ResidencyManager, budgets={5: 1}, device="emu")
    refused(TypeError, ["budgets", "dict"], ResidencyManager, budgets=[1], device="emu")


def test_register_source_field_sizes(m: ResidencyManager) -> None:
    refused(ResidencyValueError, ["fields['data']", "0..2**64-1"], m.register_source,
            lambda at: None, {"data": -1})
    refused(ResidencyValueError, ["storage_nbytes"], m.register_source, lambda at: None,
            {"data": 8}, storage_nbytes=-1)


def test_wait_pending_bytes(m: ResidencyManager) -> None:
    refused(ResidencyValueError, ["nbytes"], m.wait_pending, cuda0, -1)


def test_reservations(m: ResidencyManager) -> None:
    refused(ResidencyValueError, ["nbytes", "0..2**64-1"], MemoryReservation, cuda0, -1)
    refused(TypeError, ["label", "str"], MemoryReservation, cuda0, 8, 5)


# ---- counts and priorities ----------------------------------------------------------------


def test_trace_capacity(m: ResidencyManager) -> None:
    refused(ResidencyValueError, ["capacity", "0.."], m.set_trace_capacity, -3)
    refused(TypeError, ["capacity", "int"], m.set_trace_capacity, "3")
    refused(ResidencyValueError, ["trace_capacity"], ResidencyManager, trace_capacity=-1,
            device="emu")


@pytest.mark.parametrize("bad", [2**40, -(2**31) - 1, 2**31])
def test_priorities(m: ResidencyManager, h: ResidencyHandle, bad: int) -> None:
    refused(ResidencyValueError, ["priority", "-2**31..2**31-1"], m.adopt, np.arange(3.0),
            priority=bad)
    refused(ResidencyValueError, ["priority"], m.set_priority, h, bad)


def test_priority_extremes(m: ResidencyManager, h: ResidencyHandle) -> None:
    m.set_priority(h, 2**31 - 1)
    m.set_priority(h, -(2**31))
    refused(TypeError, ["priority", "int"], m.set_priority, h, "high")


# ---- values, labels, metadata -------------------------------------------------------------


def test_adopt_types(m: ResidencyManager) -> None:
    refused(TypeError, ["value", "DLPack producer", "list"], m.adopt, [1, 2, 3])
    refused(TypeError, ["label", "str"], m.adopt, np.arange(3.0), label=5)
    refused(TypeError, ["meta", "CKKSMeta"], m.adopt, np.arange(3.0), meta="abc")
    refused(TypeError, ["at", "Location"], m.adopt, np.arange(3.0), at=5)
    assert len(m.snapshot().values) == 0  # nothing was adopted


def test_ckks_meta_fields() -> None:
    refused(TypeError, ["CKKSMeta", "level", "int"], fheplan.CKKSMeta, level="3")
    refused(ResidencyValueError, ["CKKSMeta", "prime_ids[0]"], fheplan.CKKSMeta,
            prime_ids=(-1,))


# ---- handles, locations, streams ----------------------------------------------------------


def test_handles_and_locations(m: ResidencyManager, h: ResidencyHandle) -> None:
    refused(TypeError, ["handle", "ResidencyHandle", "str"], m.ensure, "h", cuda0)
    refused(TypeError, ["at", "Location", "int"], m.ensure, h, 5)
    refused(TypeError, ["to", "Location"], m.move, h, 5)
    refused(TypeError, ["from_location"], m.move, h, cuda0, 5)
    refused(fheplan.ResidencyLocationError, ["'gpu'"], m.ensure, h, "gpu")
    refused(TypeError, ["handles", "ResidencyHandle"], m.hold, 3, cuda0)
    refused(TypeError, ["handles[1]", "ResidencyHandle"], m.acquire, [h, 3], PAGEABLE_HOST)
    refused(TypeError, ["handle"], m.discard, 3)
    refused(TypeError, ["stream"], m.acquire, h, cuda0, consumer_stream="s")


def test_requests_are_checked_when_made(h: ResidencyHandle) -> None:
    refused(TypeError, ["requirements[0]", "ResidencyRequirement"], ResidencyRequest,
            requirements=(h,))
    refused(TypeError, ["handle"], ResidencyRequirement, 3, cuda0)
    refused(ResidencyValueError, ["position"], ResidencyRequest, position=-1)


# ---- plans: the CLI's reading of its argument, options ----------------------------------


def test_a_missing_plan_file_cannot_be_read() -> None:
    for name in ("plans/nope.rplan", "nope.rpb"):
        e = refused(ResidencyValueError, ["cannot read", name], fheplan.check, name)
        assert "expected 'rplan'" not in str(e)


def test_an_existing_plan_file_is_read() -> None:
    path = os.path.join(REPO, "plans", "attention-tile.rplan")
    assert fheplan.check(path)["ok"]
    with open(path) as f:
        assert fheplan.check(f.read())["ok"]


def test_run_options_are_checked() -> None:
    refused(ResidencyValueError, ["scale", "1..2**64-1"], fheplan.run, "x.rplan", scale=0)
    refused(TypeError, ["scale", "int"], fheplan.run, "x.rplan", scale="2")
    refused(TypeError, ["device", "str"], fheplan.run, "x.rplan", device=3)
    refused(TypeError, ["policy", "str"], fheplan.check, "x.rplan", policy=3)
    refused(TypeError, ["kernels", "dict"], fheplan.run,
            os.path.join(REPO, "plans", "attention-tile.rplan"), kernels=[1],
            unknown_as_touch=True)


BIG = """rplan 1
value a = 300 KiB replicable at host init synth(1)
plan "p" { enter { ensure a @ cuda:0 } body { run touch(a) } exit { drop a @ cuda:0 } }
"""


def test_run_on_the_emulated_device_scales_like_the_cli(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setenv("FHEPLAN_EMU_MEMORY", "65536")
    refused(ResidencyValueError, ["FHEPLAN_EMU_MEMORY", "unit"], fheplan.run, BIG, device="emu")
    monkeypatch.setenv("FHEPLAN_EMU_MEMORY", "64 KiB")
    rep = fheplan.run(BIG, device="emu")
    assert rep["ok"]
    assert rep["scale"] == 8  # 300 KiB under 64 KiB: the power of two `fheplan run` takes
    assert fheplan.run(BIG, device="emu", scale=1)["scale"] == 1
    monkeypatch.delenv("FHEPLAN_EMU_MEMORY")
    assert fheplan.run(BIG, device="emu")["scale"] == 1


def test_every_function_and_method_has_a_signature_and_says_what_it_returns() -> None:
    import inspect
    seen = 0
    for name in fheplan.__all__:
        obj = getattr(fheplan, name)
        members: List[Any] = [obj] if inspect.isbuiltin(obj) else []
        if isinstance(obj, type) and obj.__module__ == "fheplan" and hasattr(obj, "__dict__"):
            if "__text_signature__" in dir(obj) and obj.__text_signature__ is not None:
                inspect.signature(obj)
            # the module's own methods: not what a base class (Enum's hooks on Python
            # 3.12) puts in the class's dictionary under a private name
            members += [v for k, v in vars(obj).items()
                        if inspect.ismethoddescriptor(v) and callable(v)
                        and (not k.startswith("_") or k in ("__dlpack__", "__dlpack_device__"))]
        for f in members:
            inspect.signature(f)  # __text_signature__ present and valid
            assert "return" in (f.__doc__ or "").lower(), f
            seen += 1
    assert seen > 40


OPTS = """rplan 1
budget cuda:0 40 KiB
value k[3] = 16 KiB replicable at host init synth(1)
policy p = lookahead(cuda:0 -> pinned -> host)
for r in 0..<2 { for i in 0..<3 {
  request "use" using p { require k[i] @ cuda:0  body { run touch(k[i]) } }
} }
"""


def test_run_takes_the_cli_options_by_their_names() -> None:
    path = OPTS
    options: List[Dict[str, Any]] = [dict(objective="time"), dict(objective="auto"),
                                     dict(prefetch=0), dict(prefetch=2),
                                     dict(policy="as-written"), dict(policy="lru")]
    for kw in options:
        assert fheplan.run(path, unknown_as_touch=True, **kw)["ok"], kw
    assert fheplan.check(path, objective="time")["ok"]
    refused(ResidencyValueError, ["objective", "bytes, time or auto"], fheplan.run, path,
            objective="fast")
    refused(ResidencyValueError, ["prefetch"], fheplan.run, path, prefetch=-1)
    refused(ResidencyValueError, ["policy", "tiered_lru, lookahead or as-written"],
            fheplan.check, path, policy="mru")


def test_a_bytecode_file_is_read_as_the_cli_reads_it(tmp_path: Any) -> None:
    import subprocess
    cli = os.environ.get("FHEPLAN_CLI")
    if not cli:
        pytest.skip("FHEPLAN_CLI names the fheplan binary (make test-python sets it)")
    src = os.path.join(REPO, "plans", "attention-tile.rplan")
    rpb = tmp_path / "tile.rpb"
    subprocess.run([cli, "compile", src, "-o", str(rpb)], check=True)
    assert fheplan.check(str(rpb))["ok"]
    assert fheplan.check(rpb)["ok"]  # a path-like object
    refused(ResidencyValueError, ["budgets", ".rpb"], fheplan.compile, str(rpb),
            budgets={cuda0: 1 << 20})
