"""Shared fixtures: every test runs on the emulated device (FHEPLAN_DEVICE=emu, one device
whose memory is host memory), so numpy arrays stand in for device arrays."""

import os
from typing import Any, Tuple

import numpy as np
import numpy.typing as npt
import pytest

import fheplan
from fheplan import PAGEABLE_HOST, ResidencyHandle, ResidencyManager, cuda_location

os.environ.setdefault("FHEPLAN_DEVICE", "emu")

cuda0 = cuda_location("cuda:0")
# the three handles of the `values` fixture
Values = Tuple[ResidencyHandle, ResidencyHandle, ResidencyHandle]


@pytest.fixture
def residency() -> ResidencyManager:
    return ResidencyManager(device="emu")


def settle(m: ResidencyManager, stream: Any) -> None:
    """The consumer's work completes and its events are reaped (what the spec requires before
    a once-leased CUDA copy may be removed)."""
    stream.synchronize()
    m.reap()


def array(n: int, seed: int = 1, dtype: Any = np.uint64) -> npt.NDArray[Any]:
    return (np.arange(n, dtype=np.uint64) * 2654435761 + seed).astype(dtype)


@pytest.fixture
def values(residency: ResidencyManager) -> Values:
    """Three values of the spec's plan example at their initial places."""
    m = residency
    previous_weight = array(512, 1)
    weight = array(512, 2)
    inp = array(512, 3)
    h_prev = m.adopt(previous_weight, at=PAGEABLE_HOST)
    m.ensure(h_prev, cuda0)
    h_weight = m.adopt(weight, at=PAGEABLE_HOST)
    h_input = m.adopt(inp, at=fheplan.PINNED_HOST, replica_mode=fheplan.ReplicaMode.EXCLUSIVE)
    return h_prev, h_weight, h_input
