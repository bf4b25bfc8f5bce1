"""Threads: calls release the interpreter lock, so several Python threads drive one manager
at once; the manager's own rules keep them consistent."""

import threading

import numpy as np

import fheplan
from fheplan import PAGEABLE_HOST, ResidencyManager

from conftest import array, cuda0


def test_threads_share_one_manager() -> None:
    m = ResidencyManager(device="emu", trace_capacity=0)
    handles = [m.adopt(array(256, i), at=PAGEABLE_HOST) for i in range(8)]
    errors = []

    def worker(k: int) -> None:
        s = m.stream(cuda0)
        try:
            for i in range(200):
                h = handles[(k + i) % len(handles)]
                try:
                    m.ensure(h, cuda0)
                except fheplan.ResidencyError:
                    pass  # another thread's lease or copy in flight: the rules refuse
                try:
                    with m.acquire(h, at=cuda0, consumer_stream=s) as values:
                        s.synchronize()
                        assert np.from_dlpack(values[h])[1] == array(256, (k + i) % 8)[1]
                except fheplan.ResidencyStateError:
                    pass  # dropped by another thread in between
                s.synchronize()
                m.reap()
                try:
                    m.drop(h, cuda0)
                except (fheplan.ResidencyProtectedError, fheplan.ResidencyStateError):
                    pass
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    snap = m.snapshot()
    used = sum(c.charged_nbytes for v in snap.values.values()
               for loc, c in v.materializations.items() if loc == cuda0)
    assert snap.locations[cuda0].used_bytes == used  # accounting stays exact
