"""Plans from Python: compile, check (the dry run's report) and run with Python kernels."""

import os
from typing import Any, Dict, List

import numpy as np
import pytest

import fheplan
from fheplan import cuda_location

REPO = os.environ.get("FHEPLAN_REPO", os.path.join(os.path.dirname(__file__), "..", ".."))
ATTENTION = os.path.join(REPO, "plans", "attention-tile.rplan")

SMALL = """rplan 1
budget cuda:0 64 KiB
value x = 16 KiB replicable at host init synth(3)
value y = 16 KiB exclusive at pinned init synth(4)
plan "tile" {
  reserve cuda:0 8 KiB "workspace"
  enter { ensure x @ cuda:0
          move y -> cuda:0 from pinned }
  body { run scale(x, y, 7) }
  exit { move y -> pinned from cuda:0 }
}
"""


def test_compile_text_and_path() -> None:
    p = fheplan.compile(SMALL)
    assert [v["name"] for v in p.values()] == ["x", "y"]
    assert "ensure" in p.disasm()
    q = fheplan.compile(ATTENTION)
    assert len(q.values()) == 8


def test_compile_errors_carry_diagnostics() -> None:
    with pytest.raises(fheplan.ResidencyValueError) as e:
        fheplan.compile("rplan 1\nvalue x = 1 KiB replicable at host\nensure z @ cuda:0\n")
    d = [x for x in e.value.diagnostics if x["severity"] == "error"]
    assert d and d[0]["line"] == 3 and d[0]["rule"].startswith("RP")
    assert "z" in str(e.value)


def test_an_infeasible_plan_is_refused_at_compile() -> None:
    with pytest.raises(fheplan.ResidencyInfeasibleError):
        fheplan.compile(SMALL.replace("64 KiB", "20 KiB"))


def test_check_returns_the_dry_run_report() -> None:
    report = fheplan.check(ATTENTION)
    assert report["ok"] and report["mode"] == "explain" and report["device"] == "model"
    total = report["totals"]
    assert total["plans"] == 5 and total["bodies"] == 4
    over = fheplan.check(SMALL, budgets={cuda_location(0): 128 << 10})
    assert over["ok"]


def test_run_calls_python_kernels_with_views_and_the_stream() -> None:
    calls = []

    def scale(call: Any) -> None:
        x, y, factor = call.args
        assert call.location == cuda_location("cuda:0")
        assert call.stream.ptr != 0
        call.stream.synchronize()  # emulated device: the host reads after the copies
        xa = np.from_dlpack(x["data"] if "data" in x.keys() else x[list(x.keys())[0]])
        calls.append((call.name, len(call.values), xa.nbytes, factor))

    report = fheplan.run(SMALL, device="emu", kernels={"scale": scale})
    assert report["ok"] and report["mode"] != "explain"
    assert calls == [("scale", 2, 16 << 10, 7)]
    assert report["totals"]["bodies"] == 1


def test_a_kernel_that_raises_fails_the_run() -> None:
    def scale(call: Any) -> None:
        raise RuntimeError("bad kernel")

    with pytest.raises(fheplan.ResidencyError, match="bad kernel") as e:
        fheplan.run(SMALL, device="emu", kernels={"scale": scale})
    assert e.value.report["ok"] is False


def test_an_unknown_kernel_fails_unless_rehearsed() -> None:
    with pytest.raises(fheplan.ResidencyError):
        fheplan.run(SMALL, device="emu")
    assert fheplan.run(SMALL, device="emu", unknown_as_touch=True)["ok"]


def test_check_equals_the_cli_dry_run() -> None:
    import json
    import subprocess

    cli = os.environ.get("FHEPLAN_CLI")
    if not cli or not os.path.exists(cli):
        pytest.skip("FHEPLAN_CLI (the built fheplan) not given")
    out = subprocess.run([cli, "check", "--json", ATTENTION], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    assert fheplan.check(ATTENTION) == json.loads(out)["files"][0]["report"]


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


def test_engine_values_from_python_loaders() -> None:
    """engine.NAME(ARG) values filled by Python loaders (rplan_loader_register): a size
    probe first, then every new copy field by field; the run moves what check predicts."""
    keys = [np.arange(2048, dtype=np.uint64) + 1000 * k for k in range(3)]
    ct = np.full(1024, 7, dtype=np.uint64)
    seen: Dict[str, Any] = {"probes": 0, "loads": 0, "sums": []}

    def key(rec: Any) -> Any:
        if rec.data is None:              # the size probe: how many bytes the engine has
            seen["probes"] += 1
            return keys[rec.arg].nbytes
        seen["loads"] += 1
        half = keys[rec.arg].size // 2
        # writable views (__array_interface__; DLPack imports are read-only in NumPy)
        np.asarray(rec.data["b"]).view(np.uint64)[:] = keys[rec.arg][:half]
        np.asarray(rec.data["a"]).view(np.uint64)[:] = keys[rec.arg][half:]
        return None

    def ctload(rec: Any) -> Any:
        if rec.data is None:
            return ct.nbytes
        np.asarray(rec.data["data"]).view(np.uint64)[:] = ct
        return None

    def mix(call: Any) -> None:
        call.stream.synchronize()         # the host reads what the device holds
        s = sum(int(np.from_dlpack(v[f]).view(np.uint64).sum()) for v in call.values
                for f in (("b", "a") if len(v) == 2 else ("data",)))
        seen["sums"].append(s)

    rep = fheplan.run(ENGINE, device="emu", kernels={"mix": mix},
                      loaders={"key": key, "ct": ctload})
    chk = fheplan.check(ENGINE)
    assert rep["ok"]
    assert seen["probes"] == 3
    want = [int(ct.sum()) + int(keys[i].sum()) for r in range(2) for i in range(3)]
    assert seen["sums"] == want
    assert seen["loads"] >= 3                 # the budget holds two keys: they stream
    assert rep["totals"]["bytes_moved"] == chk["totals"]["bytes_moved"]
    assert rep["totals"]["bytes"] == chk["totals"]["bytes"]
    assert chk["totals"]["model_body_s"] == pytest.approx(6 * 100e-6)


def test_engine_loader_errors_are_located() -> None:
    def short(rec: Any) -> Any:
        return 8 if rec.data is None else None
    with pytest.raises(fheplan.ResidencyError) as e:
        fheplan.run(ENGINE, device="emu", kernels={"mix": lambda c: None},
                    loaders={"key": short, "ct": short})
    assert "declared 16384 bytes, the engine's loader 'key' supplies 8" in str(e.value)

    def boom(rec: Any) -> Any:
        if rec.data is None:
            return 16384 if rec.loader == "key" else 8192
        raise RuntimeError("no such key")
    with pytest.raises(fheplan.ResidencyError) as e:
        fheplan.run(ENGINE, device="emu", kernels={"mix": lambda c: None},
                    loaders={"key": boom, "ct": boom})
    assert "no such key" in str(e.value)
