"""README's Python quick start runs as written (extracted from README.md)."""

import os
import re
from typing import List

import pytest

REPO = os.environ.get("FHEPLAN_REPO", os.path.join(os.path.dirname(__file__), "..", ".."))


def python_blocks() -> List[str]:
    text = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_quick_start_runs(capsys: pytest.CaptureFixture[str]) -> None:
    blocks = python_blocks()
    assert blocks
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out.split("\n")
    assert out[0] == "4096.0"
    assert out[1] == "65536 bytes to the device"  # weight and input: 2 x 32 KiB
    assert int(out[2]) == 2 * 32768 + (1 << 20)  # reservation, weight and input
