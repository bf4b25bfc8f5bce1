"""The binding on a real GPU with PyTorch tensors (skipped without torch or CUDA).

Run on a GPU host with the module built there (`make python`):
    PYTHONPATH=build/python python3 -m pytest python/tests/test_gpu_torch.py
"""

from typing import Any

import numpy as np
import pytest

import fheplan
from test_runner import PLAN as RUNNER_PLAN  # the Runner's plan, on a real GPU
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


# ---- the process's CUDA context belongs to everyone in it ------------------------------
# fheplan never resets, destroys or releases a context it did not create, and the streams
# a kernel or loader of fheplan.run saw stay valid after the run (PyTorch's caching
# allocators record on them when tensors are freed, at exit too). The script runs in a
# subprocess so that its exit (the destructors of PyTorch's tensors and allocators) is part
# of what is checked: exit status 0.

TORCH_AROUND_RUN = r'''
import gc, sys
import numpy as np
import torch
import fheplan
from fheplan import PAGEABLE_HOST, cuda_location

cuda0 = cuda_location("cuda:0")
torch.cuda.set_device(0)

# before: PyTorch owns device memory, pinned memory and a stream of its own
before = torch.arange(1 << 20, device="cuda:0", dtype=torch.int64)
pinned_before = torch.ones(1 << 16).pin_memory()
side = torch.cuda.Stream(device="cuda:0")

PLAN = """rplan 1
budget cuda:0 48 KiB
value key[3] = 16 KiB replicable source engine.key(i)
value ct = 8 KiB exclusive at pinned init engine.ct(0)
kernel mix cost 100 us
policy p = lookahead(cuda:0 -> pinned -> host)
for r in 0..<2 { for i in 0..<3 {
  request "use" using p { require ct @ cuda:0  require key[i] @ cuda:0
                          body { run mix(ct, key[i]) } }
} }
"""
keys = [(torch.arange(2048, dtype=torch.int64) * (k + 1)).pin_memory() for k in range(3)]
ct = torch.full((1024,), 7, dtype=torch.int64).pin_memory()
sums, kept = [], []


def load(rec):
    src = keys[rec.arg] if rec.loader == "key" else ct
    if rec.data is None:
        return src.numel() * 8
    dst = torch.from_dlpack(rec.data["data"]).view(torch.int64)
    if not dst.is_cuda or rec.stream is None:  # a host copy (ct starts in pinned memory)
        dst.copy_(src)
        return None
    stream = torch.cuda.ExternalStream(rec.stream.ptr, device=dst.device)
    with torch.cuda.stream(stream):
        dst.copy_(src, non_blocking=True)  # pinned -> device on fheplan's stream
        tmp = torch.empty(1024, device=dst.device)  # allocated on fheplan's stream
        tmp.fill_(1.0)
    kept.append(tmp)  # freed after the run: its block belongs to that stream


def mix(call):
    stream = torch.cuda.ExternalStream(call.stream.ptr, device="cuda:0")
    with torch.cuda.stream(stream):
        total = sum(torch.from_dlpack(v["data"]).view(torch.int64).sum() for v in call.values)
        sums.append(int(total))  # int() waits for the stream


rep = fheplan.run(PLAN, device="cuda", kernels={"mix": mix},
                  loaders={"key": load, "ct": load})
assert rep["ok"], rep
want = [int(ct.sum()) + int(keys[i].sum()) for r in range(2) for i in range(3)]
assert sums == want, (sums, want)

# after: PyTorch's memory, streams and pinned tensors still work, and go cleanly
del kept, keys, ct
gc.collect()
with torch.cuda.stream(side):
    after = before * 2
side.synchronize()
assert int(after.sum()) == 2 * int(before.sum())
del pinned_before
gc.collect()
torch.cuda.synchronize()

# a manager in the same process, adopting a torch tensor, then another run
m = fheplan.ResidencyManager(device="cuda")
t = torch.arange(1 << 16, dtype=torch.int64, device="cuda:0")
h = m.adopt(t, at=cuda0)
st = torch.cuda.Stream(device="cuda:0")
with m.acquire(h, at=cuda0, consumer_stream=st) as values:
    with torch.cuda.stream(st):
        got = int(torch.from_dlpack(values[h]).sum())
assert got == (1 << 16) * ((1 << 16) - 1) // 2
sums.clear()
keys = [(torch.arange(2048, dtype=torch.int64) * (k + 1)).pin_memory() for k in range(3)]
ct = torch.full((1024,), 7, dtype=torch.int64).pin_memory()
kept = []
assert fheplan.run(PLAN, device="cuda", kernels={"mix": mix},
                   loaders={"key": load, "ct": load})["ok"]
assert len(sums) == 6
x = torch.randn(256, 256, device="cuda:0")
assert torch.isfinite(x @ x).all()
torch.cuda.synchronize()
print("torch around fheplan: ok")
'''


def test_torch_before_inside_and_after_run_exits_cleanly(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys
    script = tmp_path / "around.py"
    script.write_text(TORCH_AROUND_RUN)
    env = dict(os.environ)
    env.pop("FHEPLAN_DEVICE", None)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, (out.returncode, out.stdout[-2000:], out.stderr[-4000:])
    assert "torch around fheplan: ok" in out.stdout


def test_a_runner_reads_torch_tensors_in_place() -> None:
    # acc: a CUDA tensor adopted where the kernel runs; ct: a pinned tensor, moved to the
    # device each run; neither is copied when the Runner takes it
    acc = torch.zeros(512, dtype=torch.int64, device="cuda:0")
    ct = torch.arange(1024, dtype=torch.int64).pin_memory()
    seen = []

    def add(call: Any) -> None:
        s = torch.cuda.ExternalStream(call.stream.ptr)
        with torch.cuda.stream(s):
            a, c, k = (torch.from_dlpack(v["data"]).view(torch.uint8).view(torch.int64)
                       for v in call.args)
            seen.append((a.data_ptr(), int(c[1])))
            a += c[:512] + k[:512]

    def load(rec: Any) -> Any:
        if rec.data is None:
            return 8192
        if rec.device_memory:
            with torch.cuda.stream(torch.cuda.ExternalStream(rec.stream.ptr)):
                torch.from_dlpack(rec.data["data"]).view(torch.uint8).fill_(1)
        else:
            np.asarray(rec.data["data"]).view(np.uint8)[:] = 1
        return None

    key_word = 0x0101010101010101
    with fheplan.Runner(RUNNER_PLAN, device="cuda", kernels={"add": add},
                        loaders={"key": load}, values={"acc": acc, "ct": ct}) as r:
        assert r.values["acc"] is acc and r.values["ct"] is ct
        for i in range(3):
            ct[1] = 200 + i  # the pinned producer's memory is what the next run moves
            assert r.run()["ok"]
    torch.cuda.synchronize()
    assert [p for p, _ in seen] == [acc.data_ptr()] * 3
    assert [x for _, x in seen] == [200, 201, 202]
    want = 3 * (torch.arange(512, dtype=torch.int64) + key_word)
    want[1] = 200 + 201 + 202 + 3 * key_word
    assert torch.equal(acc.cpu(), want)
