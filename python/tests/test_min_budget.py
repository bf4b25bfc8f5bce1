"""fheplan.min_budget: the search of `fheplan check --min-budget`, compared with the CLI."""

import json
import os
import subprocess
from typing import Any, Dict, List

import pytest

import fheplan

REPO = os.environ.get("FHEPLAN_REPO", os.path.join(os.path.dirname(__file__), "..", ".."))
NOT_MONOTONIC = os.path.join(REPO, "tests", "oracle", "cases", "issue27-8-not-monotonic.rplan")
DESIGN = os.path.join(REPO, "plans", "design-example.rplan")

# the CLI's JSON member for each attribute of the result
CLI_NAMES = {
    "found": "found", "unused": "unused", "exact": "exact", "monotonic": "monotonic",
    "threshold": "threshold_bytes", "feasible": "feasible_bytes", "near": "within_5pct_bytes",
    "peak": "unbounded_peak_bytes",
    "probes": "probes", "intervals_found": "intervals_found",
    "unbounded_s": "unbounded_predicted_s", "threshold_s": "predicted_s_at_threshold",
    "feasible_s": "predicted_s_at_feasible", "near_s": "predicted_s_at_within_5pct",
}


def cli_min_budget(path: str, loc: str, extra: List[str]) -> Dict[str, Any]:
    cli = os.environ.get("FHEPLAN_CLI")
    if not cli or not os.path.exists(cli):
        pytest.skip("FHEPLAN_CLI (the built fheplan) not given")
    out = subprocess.run([cli, "check", "--json", "--min-budget", loc, *extra, path],
                         stdout=subprocess.PIPE, text=True).stdout
    mb: Dict[str, Any] = json.loads(out)["files"][0]["min_budget"]
    return mb


@pytest.mark.parametrize("path,loc,kw,extra", [
    (NOT_MONOTONIC, "cuda:0", {}, []),
    (NOT_MONOTONIC, "pinned", {}, []),
    (NOT_MONOTONIC, "host", {}, []),
    (NOT_MONOTONIC, "cuda:0", {"policy": "lookahead", "objective": "time"},
     ["--policy", "lookahead", "--objective", "time"]),
    (DESIGN, "cuda:0", {}, []),
    (DESIGN, "pinned", {"budgets": {"cuda:0": 1 << 30}}, ["--budget", "cuda:0=1GiB"]),
])
def test_min_budget_matches_cli(path: str, loc: str, kw: Dict[str, Any],
                                extra: List[str]) -> None:
    r = fheplan.min_budget(path, loc, **kw)
    mb = cli_min_budget(path, loc, extra)
    assert r.found is True and mb["found"] is True
    assert r.location == fheplan.Location(loc) and mb["location"] == loc
    for attr, member in CLI_NAMES.items():
        assert getattr(r, attr) == mb[member], attr
    assert [list(i) for i in r.intervals] == [[i["from"], i["to"]] for i in mb["intervals"]]
    assert r.reason == ""


def test_min_budget_not_monotonic() -> None:
    r = fheplan.min_budget(NOT_MONOTONIC, fheplan.cuda_location(0))
    assert not r.monotonic and r.intervals_found == 4 and r.exact
    assert r.feasible < r.threshold and r.intervals[-1] == (r.threshold, None)


def test_min_budget_none_found_matches_cli() -> None:
    # 1 KiB on cuda:0 refuses the plan whatever the pinned budget is
    r = fheplan.min_budget(NOT_MONOTONIC, "pinned", budgets={"cuda:0": 1024})
    mb = cli_min_budget(NOT_MONOTONIC, "pinned", ["--budget", "cuda:0=1KiB"])
    assert r.found is False and mb["found"] is False
    assert "cuda:0" in r.reason and r.intervals == []


def test_min_budget_program_and_text() -> None:
    with open(NOT_MONOTONIC) as f:
        text = f.read()
    a = fheplan.min_budget(fheplan.compile(NOT_MONOTONIC), "cuda:0")
    b = fheplan.min_budget(text, "cuda:0")
    assert vars(a) == vars(b)


def test_min_budget_ignores_budget_at_location() -> None:
    # budgets= at the searched location is replaced by the search, as in the CLI
    a = fheplan.min_budget(NOT_MONOTONIC, "cuda:0", budgets={"cuda:0": 1})
    assert a.found and a.threshold == 14336


@pytest.mark.parametrize("args,kw,exc,words", [
    ((NOT_MONOTONIC, "gpu"), {}, fheplan.ResidencyLocationError, "gpu"),
    ((NOT_MONOTONIC, 3), {}, TypeError, "location"),
    ((NOT_MONOTONIC, "host"), {"budgets": {"host": -1}}, fheplan.ResidencyValueError,
     "budgets[host]"),
    ((NOT_MONOTONIC, "host"), {"budgets": [1]}, TypeError, "budgets"),
    ((NOT_MONOTONIC, "host"), {"policy": "fifo"}, fheplan.ResidencyValueError, "policy"),
    ((NOT_MONOTONIC, "host"), {"objective": "speed"}, fheplan.ResidencyValueError,
     "objective"),
    (("rplan 1\nvalue x = oops\n", "host"), {}, fheplan.ResidencyValueError, "<python>:2:"),
])
def test_min_budget_bad_arguments(args: Any, kw: Dict[str, Any], exc: Any, words: str) -> None:
    with pytest.raises(exc) as e:
        fheplan.min_budget(*args, **kw)
    assert words in str(e.value)
