"""NCCL's mechanics, without a GPU: the unique id made by the group's first process
reaches every process, and each call gets Ember's stream and NCCL's codes. A stand-in
library records the calls; the real libnccl (where the wheel is installed) is loaded
and asked for its version and a unique id, which work without a GPU."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

from ember.distributed import nccl
from ember.distributed.errors import DistributedError


class StandIn:
    """A libnccl that records its calls; ncclGetUniqueId writes a recognisable id."""

    def __init__(self, fail_with: int = 0) -> None:
        self.calls: list[tuple] = []
        self.fail_with = fail_with

    def ncclGetUniqueId(self, pointer):
        ctypes.memmove(pointer, bytes(range(128)), 128)
        return 0

    def ncclCommInitRank(self, comm, nranks, unique, rank):
        self.calls.append(("init", nranks, bytes(unique), rank))
        ctypes.cast(comm, ctypes.POINTER(ctypes.c_void_p))[0] = 0xC0FFEE
        return 0

    def ncclAllReduce(self, send, receive, count, dtype, op, comm, stream):
        self.calls.append(("all_reduce", send, receive, count, dtype, op, comm.value
                           if hasattr(comm, "value") else comm, stream))
        return self.fail_with

    def ncclAllGather(self, send, receive, count, dtype, comm, stream):
        self.calls.append(("all_gather", send, receive, count, dtype, stream))
        return 0

    def ncclCommDestroy(self, comm):
        self.calls.append(("destroy",))
        return 0

    def ncclGetErrorString(self, result):
        return b"unhandled cuda error"


def _communicators(count: int, library_for) -> list:
    """``count`` processes' communicators, the id exchange done as MPI would."""
    made_by_first = {}

    def exchange(raw, ranks):
        made_by_first.setdefault("id", raw.copy())  # process 0 comes first here
        return made_by_first["id"]

    return [nccl.NcclCommunicator(library_for(r), range(count), r, stream=0x5000 + r,
                                  exchange=exchange) for r in range(count)]


def test_unique_id_of_the_first_process_reaches_every_process():
    libraries = [StandIn() for _ in range(3)]
    comms = _communicators(3, lambda r: libraries[r])
    for rank, library in enumerate(libraries):
        (_, nranks, unique, position), = library.calls
        assert (nranks, position) == (3, rank) and unique == bytes(range(128))
    assert all(c.comm.value == 0xC0FFEE for c in comms)


def test_calls_carry_the_stream_and_nccl_codes():
    library = StandIn()
    comm, = _communicators(1, lambda r: library)
    comm.all_reduce(0x1000, 0x2000, 256, np.float32, "max")
    comm.all_gather(0x1000, 0x3000, 8, np.int32)
    comm.close()
    assert library.calls[1] == ("all_reduce", 0x1000, 0x2000, 256, 7, 2, 0xC0FFEE, 0x5000)
    assert library.calls[2] == ("all_gather", 0x1000, 0x3000, 8, 2, 0x5000)
    assert library.calls[3] == ("destroy",)


def test_nccl_errors_are_clear():
    library = StandIn(fail_with=1)
    comm, = _communicators(1, lambda r: library)
    with pytest.raises(DistributedError, match="ncclAllReduce failed .*unhandled cuda"):
        comm.all_reduce(1, 2, 3, np.float32)
    with pytest.raises(DistributedError, match="NCCL has no complex64"):
        comm.all_reduce(1, 2, 3, np.complex64)


def test_real_library_without_a_gpu():
    library = nccl.load_library()
    if library is None:
        pytest.skip("nvidia-nccl-cu13 is not installed")
    assert nccl.nccl_version(library) >= 22000
    unique = nccl.UniqueId()
    assert library.ncclGetUniqueId(ctypes.byref(unique)) == 0
    assert bytes(unique) != bytes(128)
