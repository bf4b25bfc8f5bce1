"""The binding on a real GPU with PyTorch tensors (skipped without torch or CUDA).

Run on a GPU host with the module built there (`make python`):
    PYTHONPATH=build/python python3 -m pytest python/tests/test_gpu_torch.py
"""

from typing import Any

import numpy as np
import pytest

import fheplan
from fheplan import (PAGEABLE_HOST, PINNED_HOST, ReplicaMode, ResidencyController,
                     ResidencyManager, ResidencyRequest, ResidencyRequirement, cuda_location)

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch", allow_module_level=True)

cuda0 = cuda_location("cuda:0")


@pytest.fixture
def m() -> ResidencyManager:
    mgr = ResidencyManager(device="cuda")
    assert mgr.backend == "cuda"
    return mgr


def settle(m: ResidencyManager, *streams: Any) -> None:
    for s in streams:
        s.synchronize()
    torch.cuda.synchronize()
    m.reap()


def test_adopting_a_cuda_tensor_keeps_its_memory(m: ResidencyManager) -> None:
    t = torch.arange(1 << 16, dtype=torch.int64, device="cuda:0")
    ptr = t.data_ptr()
    h = m.adopt(t, at=cuda0, replica_mode=ReplicaMode.EXCLUSIVE)
    del t
    s = torch.cuda.Stream(device="cuda:0")
    with m.acquire(h, at=cuda0, consumer_stream=s) as values:
        with torch.cuda.stream(s):
            view = torch.from_dlpack(values[h])
            assert view.data_ptr() == ptr  # zero copy both ways
            assert values[h]["data"].__cuda_array_interface__["data"][0] == ptr
            total = int(view.sum())
        del view
    assert total == (1 << 16) * ((1 << 16) - 1) // 2
    settle(m, s)


def test_a_lease_on_a_torch_stream_protects_until_its_work_completes(m: ResidencyManager) -> None:
    host = np.arange(1 << 20, dtype=np.float32)
    h = m.adopt(host, at=PAGEABLE_HOST)
    m.ensure(h, cuda0)
    compute_stream = torch.cuda.Stream(device="cuda:0")
    with m.acquire((h,), at=cuda0, consumer_stream=compute_stream) as values:
        with torch.cuda.stream(compute_stream):
            x = torch.from_dlpack(values[h])
            out = x * 2
        del x
    with pytest.raises(fheplan.ResidencyLeaseError):
        m.acquire(h, at=cuda0)  # a CUDA lease needs its consumer stream
    settle(m, compute_stream)
    assert torch.equal(out.cpu(), torch.from_numpy(host) * 2)
    m.drop(h, cuda0)  # the consumer's event completed and was reaped


def test_an_external_stream_as_consumer(m: ResidencyManager) -> None:
    h = m.adopt(np.ones(4096, dtype=np.float64), at=PAGEABLE_HOST)
    m.ensure(h, cuda0)
    own = m.stream(cuda0)
    ext = torch.cuda.ExternalStream(own.ptr, device="cuda:0")
    with m.acquire(h, at=cuda0, consumer_stream=ext) as values:
        with torch.cuda.stream(ext):
            s = torch.from_dlpack(values[h]).sum()
    settle(m, own)
    assert float(s) == 4096.0
    m.drop(h, cuda0)


def test_dlpack_stream_orders_a_second_consumer(m: ResidencyManager) -> None:
    h = m.adopt(np.full(1 << 18, 3, dtype=np.int32), at=PAGEABLE_HOST)
    m.ensure(h, cuda0)
    s1 = torch.cuda.Stream(device="cuda:0")
    s2 = torch.cuda.Stream(device="cuda:0")
    with m.acquire(h, at=cuda0, consumer_stream=s1) as values:
        with torch.cuda.stream(s2):  # torch.from_dlpack passes s2 to __dlpack__
            y = torch.from_dlpack(values[h]).sum()
    settle(m, s1, s2)
    assert int(y) == 3 << 18
    m.drop(h, cuda0)


def test_adopt_orders_the_producers_pending_work(m: ResidencyManager) -> None:
    side = torch.cuda.Stream(device="cuda:0")
    with torch.cuda.stream(side):
        t = torch.zeros(1 << 22, device="cuda:0")
        t += 5  # still running on `side` (torch's current stream) when adopt is called
        h = m.adopt(t, at=cuda0)  # __dlpack__(stream=...) orders side's work first
    m.ensure(h, PAGEABLE_HOST)
    with m.acquire(h, at=PAGEABLE_HOST) as values:
        assert float(np.from_dlpack(values[h]).min()) == 5.0


def test_pinned_tensors_and_the_controller(m: ResidencyManager) -> None:
    pinned = torch.arange(1 << 16, dtype=torch.int64).pin_memory()
    h = m.adopt(pinned, at=PINNED_HOST, replica_mode=ReplicaMode.EXCLUSIVE)
    controller = ResidencyController(m)
    request = ResidencyRequest(name="r", requirements=(ResidencyRequirement(h, cuda0),))
    compute_stream = torch.cuda.Stream(device="cuda:0")
    transfer_stream = torch.cuda.Stream(device="cuda:0")
    with controller.use(request, consumer_streams={cuda0: compute_stream},
                        transfer_streams={cuda0: transfer_stream}) as use:
        with torch.cuda.stream(compute_stream):
            v = torch.from_dlpack(use.value(h, at=cuda0))
            total = int(v.sum())
    assert total == (1 << 16) * ((1 << 16) - 1) // 2
    settle(m, compute_stream, transfer_stream)


def test_dropping_an_adopted_tensor_returns_it_to_torch(m: ResidencyManager) -> None:
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(0)
    t = torch.ones(1 << 24, device="cuda:0")  # 64 MiB
    h = m.adopt(t, at=cuda0)
    del t
    assert torch.cuda.memory_allocated(0) - before == 64 << 20
    m.ensure(h, PINNED_HOST)
    reserved = torch.cuda.memory_reserved(0)
    m.drop(h, cuda0)  # offload: the producer goes back to torch's caching allocator
    torch.cuda.synchronize()
    m.reap()
    fheplan._fheplan._drain_releases()
    assert torch.cuda.memory_allocated(0) == before
    assert torch.cuda.memory_reserved(0) == reserved  # the cache keeps its blocks
    loc = m.snapshot().locations[cuda0]
    assert loc.used_bytes == 0 and loc.observation.device_total_bytes > 0
