"""Plans from Python: compile, check (the dry run's report) and run with Python kernels."""

import os

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


def test_compile_text_and_path():
    p = fheplan.compile(SMALL)
    assert [v["name"] for v in p.values()] == ["x", "y"]
    assert "ensure" in p.disasm()
    q = fheplan.compile(ATTENTION)
    assert len(q.values()) == 8


def test_compile_errors_carry_diagnostics():
    with pytest.raises(fheplan.ResidencyValueError) as e:
        fheplan.compile("rplan 1\nvalue x = 1 KiB replicable at host\nensure z @ cuda:0\n")
    d = [x for x in e.value.diagnostics if x["severity"] == "error"]
    assert d and d[0]["line"] == 3 and d[0]["rule"].startswith("RP")
    assert "z" in str(e.value)


def test_an_infeasible_plan_is_refused_at_compile():
    with pytest.raises(fheplan.ResidencyInfeasibleError):
        fheplan.compile(SMALL.replace("64 KiB", "20 KiB"))


def test_check_returns_the_dry_run_report():
    report = fheplan.check(ATTENTION)
    assert report["ok"] and report["mode"] == "explain" and report["device"] == "model"
    total = report["totals"]
    assert total["plans"] == 5 and total["bodies"] == 4
    over = fheplan.check(SMALL, budgets={cuda_location(0): 128 << 10})
    assert over["ok"]


def test_run_calls_python_kernels_with_views_and_the_stream():
    calls = []

    def scale(call):
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


def test_a_kernel_that_raises_fails_the_run():
    def scale(call):
        raise RuntimeError("bad kernel")

    with pytest.raises(fheplan.ResidencyError, match="bad kernel") as e:
        fheplan.run(SMALL, device="emu", kernels={"scale": scale})
    assert e.value.report["ok"] is False


def test_an_unknown_kernel_fails_unless_rehearsed():
    with pytest.raises(fheplan.ResidencyError):
        fheplan.run(SMALL, device="emu")
    assert fheplan.run(SMALL, device="emu", unknown_as_touch=True)["ok"]


def test_check_equals_the_cli_dry_run():
    import json
    import subprocess

    cli = os.environ.get("FHEPLAN_CLI")
    if not cli or not os.path.exists(cli):
        pytest.skip("FHEPLAN_CLI (the built fheplan) not given")
    out = subprocess.run([cli, "check", "--json", ATTENTION], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    assert fheplan.check(ATTENTION) == json.loads(out)["files"][0]["report"]
