"""Small collectives, whose data rides with the guard's meeting, give the same results
whether a process meets in C (``meeting.c``) or through mpi4py: processes 1 and up meet
the way the first argument says ('native' or 'python'), process 0 in C. The C meeting
sums float32, float64 and integers itself, and stacks other dtypes for NumPy to sum:
both in the order of the ranks, bit for bit. Prints 'no native meeting' and exits where
the C meeting cannot be built here."""
import sys

import numpy as np

import ember
import ember.distributed
from ember.distributed import native_meeting
from ember.distributed.guard import INLINE_BYTES
from ember.distributed.host_collectives import allgather, reduce_in_order
from ember.distributed.state import current
from ember.core.dtypes import bfloat16

ember.distributed.initialize()
build = native_meeting._build()
if build is None or build.wait() is None:
    print("no native meeting", flush=True)
    sys.exit(0)
me, count = ember.process_index(), ember.process_count()
guard = current().guard
if sys.argv[1] == "python" and me > 0:
    guard._native_meeting = lambda: None


def data(rank: int, shape: tuple, dtype) -> np.ndarray:
    return (np.random.default_rng(rank).standard_normal(shape) * 100).astype(dtype)


DTYPES = (np.float32, np.float64, np.int32, np.int8, np.uint16, np.int64, np.float16,
          *([bfloat16] if bfloat16 is not None else []))


def check_group(ranks: tuple) -> None:
    for dtype in DTYPES:
        largest = INLINE_BYTES // np.dtype(dtype).itemsize  # the most that rides along
        for shape in ((), (1,), (3, 5), (largest,)):
            every = np.stack([data(r, shape, dtype) for r in ranks])
            got = allgather(data(me, shape, dtype), ranks)
            np.testing.assert_array_equal(got, every)
            total = every[0].copy()
            for row in every[1:]:
                total += row  # in the order of ranks
            np.testing.assert_array_equal(reduce_in_order(data(me, shape, dtype)[None],
                                                          ranks), total)
            np.testing.assert_array_equal(
                reduce_in_order(data(me, shape, dtype)[None], ranks, "max"), every.max(0))
            # a gather's result is the caller's: later meetings leave it alone
            reduce_in_order(np.zeros((1, *shape), dtype), ranks)
            np.testing.assert_array_equal(got, every)
        # several contributions per process: every one in turn, in the order of ranks
        shape = (7, 3)
        mine = np.stack([data(me, shape, dtype), data(me + 10, shape, dtype)])
        total = data(ranks[0], shape, dtype)
        for rank in ranks:
            for row in (data(rank, shape, dtype), data(rank + 10, shape, dtype))[
                    rank == ranks[0]:]:
                total += row
        np.testing.assert_array_equal(reduce_in_order(mine, ranks), total)


check_group(tuple(range(count)))
if count > 2:  # a group in another order, without process 1
    if me != 1:
        check_group((2, 0))
native = guard._native is not None
print(f"meetings agree; process {me} met {'in C' if native else 'through mpi4py'}",
      flush=True)
