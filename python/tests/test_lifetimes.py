"""What the binding keeps alive and frees, and with which lock: stream views outlive neither
the stream objects they were made from nor the C objects recording on them, and Python memory
is freed only with the interpreter lock.

Each case runs in a child interpreter with Python's debug allocator (PYTHONMALLOC=debug
aborts on a PyMem call without the lock, which Python 3.12 and later turn into a crash) and
with freed C memory overwritten (MALLOC_PERTURB_), so that a use after free shows instead of
reading stale bytes. A hang is a failure too (the time limit)."""

import os
import subprocess
import sys
import textwrap

PRELUDE = """
import numpy as np
import fheplan
from fheplan import (PAGEABLE_HOST, PINNED_HOST, ReplicaMode, ResidencyController,
                     ResidencyManager, ResidencyRequest, ResidencyRequirement, cuda_location)

cuda0 = cuda_location("cuda:0")
m = ResidencyManager(device="emu")


class Consumer:
    '''What torch.from_dlpack does under `with torch.cuda.stream(s)`: __dlpack__(stream=s).'''

    def __init__(self, value, stream):
        self.value, self.stream = value, stream

    def __dlpack__(self, **kw):
        capsule = self.value.__dlpack__(stream=self.stream.ptr)
        self.stream.synchronize()  # the "kernel" runs on the host here: the stream has caught up
        return capsule

    def __dlpack_device__(self):
        return self.value.__dlpack_device__()
"""


def run_child(body: str) -> None:
    env = dict(os.environ, PYTHONMALLOC="debug", MALLOC_PERTURB_="165", FHEPLAN_DEVICE="emu")
    code = PRELUDE + textwrap.dedent(body) + "\nprint('child: ok')\n"
    try:
        r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=120)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the child hung:\n{e.output}") from None
    assert r.returncode == 0 and "child: ok" in r.stdout, \
        f"the child failed (exit {r.returncode}):\n{r.stdout}"


def test_a_use_over_a_pinned_value_with_consumer_and_transfer_streams() -> None:
    # The H200 test test_pinned_tensors_and_the_controller, with numpy and emulated streams:
    # the use's end freed its stream maps without the interpreter lock.
    run_child("""
        n = 1 << 12
        pinned = np.arange(n, dtype=np.int64)
        h = m.adopt(pinned, at=PINNED_HOST, replica_mode=ReplicaMode.EXCLUSIVE)
        controller = ResidencyController(m)
        request = ResidencyRequest(name="r", requirements=(ResidencyRequirement(h, cuda0),))
        compute_stream, transfer_stream = m.stream(cuda0), m.stream(cuda0)
        with controller.use(request, consumer_streams={cuda0: compute_stream},
                            transfer_streams={cuda0: transfer_stream}) as use:
            v = np.from_dlpack(Consumer(use.value(h, at=cuda0), compute_stream))
            total = int(v.sum())
        assert total == n * (n - 1) // 2, total
        assert use.report["transitions"][0]["action"] == "move"
        compute_stream.synchronize()
        transfer_stream.synchronize()
        m.reap()
        assert not m.is_resident(h, PINNED_HOST) and m.is_resident(h, cuda0)
    """)


def test_streams_given_inline_live_as_long_as_their_views() -> None:
    # m.stream(...) written in the call is freed when the call returns; the lease, use and
    # scope record on it later (at release, end, exit), so they keep it. (A stream given as
    # a bare int, as __dlpack__(stream=...) gets it, is the caller's to keep: `reader`.)
    run_child("""
        reader = m.stream(cuda0)
        h = m.adopt(np.arange(512, dtype=np.uint64), at=PAGEABLE_HOST)
        m.ensure(h, cuda0)
        with m.acquire(h, at=cuda0, consumer_stream=m.stream(cuda0)) as values:
            total = int(np.from_dlpack(Consumer(values[h], reader)).sum())
        assert total == 512 * 511 // 2
        with m.acquire(h, at=cuda0, consumer_stream=m.stream(cuda0)) as values:
            values.add_consumer_stream(m.stream(cuda0))
            np.from_dlpack(Consumer(values[h], reader)).sum()
        controller = ResidencyController(m)
        request = ResidencyRequest(name="r", requirements=(ResidencyRequirement(h, cuda0),))
        with controller.use(request, consumer_streams={cuda0: m.stream(cuda0)},
                            transfer_streams={cuda0: m.stream(cuda0)}) as use:
            use.add_consumer_stream(cuda0, m.stream(cuda0))
            np.from_dlpack(Consumer(use.value(h, at=cuda0), reader)).sum()
        g = m.adopt(np.arange(64, dtype=np.uint64), at=PAGEABLE_HOST)
        plan = fheplan.ResidencyPlan(name="p", enter=(fheplan.EnsureResident(g, cuda0),),
                                     exit=(fheplan.DropResident(g, cuda0),))
        with m.scope(plan, transfer_streams={cuda0: m.stream(cuda0)}):
            pass
        # every consumer's event completed on the stream it was recorded on
        import gc
        gc.collect()
        del values, use
        reader.synchronize()
        m.reap()
        m.drop(h, cuda0)
        assert not m.is_resident(h, cuda0) and not m.is_resident(g, cuda0)
    """)


def test_an_end_refused_during_a_load_keeps_the_streams_until_the_use_goes() -> None:
    # A use's end refused (a load runs on the manager) leaves the use active with its leases:
    # their consumer views must outlive it, until the use object goes and ends it.
    run_child("""
        h = m.adopt(np.arange(256, dtype=np.uint64), at=PAGEABLE_HOST)
        controller = ResidencyController(m)
        request = ResidencyRequest(name="r", requirements=(ResidencyRequirement(h, cuda0),))
        compute_stream = m.stream(cuda0)
        use = controller.use(request, consumer_streams={cuda0: compute_stream})
        refused = []

        def load(at):
            try:
                use.__exit__(None, None, None)
            except fheplan.ResidencyReentrancyError:
                refused.append(True)
            return np.arange(64, dtype=np.uint64)

        src = m.register_source(load, fields={"data": ((64,), "uint64")})
        with use:
            np.from_dlpack(Consumer(use.value(h, at=cuda0), compute_stream)).sum()
            m.ensure(src, PAGEABLE_HOST)
        assert refused == [True]
        del use, compute_stream  # ends the use: its lease records on the consumer stream
        m.reap()
        m.drop(h, cuda0)
    """)
