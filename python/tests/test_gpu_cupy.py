"""A Runner over CuPy arrays on a real GPU (skipped without CuPy or a CUDA device).

Run on a GPU host with the module built there (`make python`):
    PYTHONPATH=build/python python3 -m pytest python/tests/test_gpu_cupy.py
"""

from typing import Any, List, Tuple

import numpy as np
import pytest

import fheplan
from test_runner import PLAN  # the Runner's plan, on a real GPU

cp = pytest.importorskip("cupy")
cupyx = pytest.importorskip("cupyx")
try:
    _ndev = cp.cuda.runtime.getDeviceCount()
except Exception:  # no driver, no device
    _ndev = 0
if not _ndev:
    pytest.skip("no CUDA device visible to CuPy", allow_module_level=True)


def words(producer: Any) -> Any:
    return cp.from_dlpack(producer).view(cp.uint8).view(cp.int64)


def test_a_runner_reads_cupy_arrays_in_place() -> None:
    # acc: a CuPy device array adopted where the kernel runs; ct: a NumPy array over
    # CuPy's pinned memory, moved to the device each run; neither is copied
    acc = cp.zeros(512, dtype=cp.int64)
    ct = cupyx.zeros_pinned((1024,), dtype=np.int64)
    ct[:] = np.arange(1024, dtype=np.int64)
    seen: List[Tuple[int, int]] = []

    def add(call: Any) -> None:
        with cp.cuda.ExternalStream(call.stream.ptr):
            a, c, k = (words(v["data"]) for v in call.args)
            seen.append((a.data.ptr, int(c[1])))
            a += c[:512] + k[:512]

    def load(rec: Any) -> Any:
        if rec.data is None:
            return 8192
        if rec.device_memory:
            with cp.cuda.ExternalStream(rec.stream.ptr):
                cp.from_dlpack(rec.data["data"]).view(cp.uint8).fill(1)
        else:
            np.asarray(rec.data["data"]).view(np.uint8)[:] = 1
        return None

    key_word = 0x0101010101010101
    with fheplan.Runner(PLAN, device="cuda", kernels={"add": add}, loaders={"key": load},
                        values={"acc": acc, "ct": ct}) as r:
        assert r.values["acc"] is acc and r.values["ct"] is ct
        for i in range(3):
            ct[1] = 200 + i  # the pinned producer's memory is what the next run moves
            assert r.run()["ok"]
    cp.cuda.Device(0).synchronize()
    assert [p for p, _ in seen] == [acc.data.ptr] * 3
    assert [x for _, x in seen] == [200, 201, 202]
    want = 3 * (np.arange(512, dtype=np.int64) + key_word)
    want[1] = 200 + 201 + 202 + 3 * key_word
    assert np.array_equal(cp.asnumpy(acc), want)
