"""Collectives that never hang: every cross-process collective first meets its peers.

Before the data moves, each process sends its peers a small signature of the collective
it is at (its sequence number, operation, shape and dtype) and waits for theirs, while
it watches for notices from processes that raised or exited. A small collective's data
(up to ``INLINE_BYTES``) rides along with the signature, so it takes one meeting, not
two; a peer reads it only once the signatures agree. So processes that run
different programs get an error naming the mismatch, a process that is gone is named
within ``config.distributed_timeout`` seconds, and MPI's process-failure reports (Open
MPI's ULFM, which ``ember launch`` turns on) name a process killed mid-step. All of it
is MPI point-to-point messages on a communicator of its own, apart from the data. The
meeting itself runs in C (``meeting.c``) once that is built, else through mpi4py.
"""
from __future__ import annotations

import ctypes
import functools
import json
import os
import sys
import time
from typing import Any, Callable, Collection, Sequence

import numpy as np

from ember.config import config
from ember.distributed.errors import DistributedError, PeerFailedError

__all__ = ["Guard"]

SIGNATURE_BYTES = 512
INLINE_BYTES = 1 << 16  # data sent with the signature; every receive has room for it
TAG_SIGNATURE = 7001
TAG_NOTICE = 7002
_POLL_SECONDS = 0.0002
_BUSY_SECONDS = 0.0005
_SPIN_SECONDS = 0.005
_POLLS_PER_NOTICE_READ = 16
PENDING = -1  # the C meeting's status while peers have not come


class Guard:
    """The meeting point of one job's processes (``world``: an MPI intracommunicator)."""

    def __init__(self, world: Any) -> None:
        from mpi4py import MPI

        self.MPI = MPI
        self.control = world.Dup()  # signatures and notices, never data
        self.control.Set_errhandler(MPI.ERRORS_RETURN)
        self.rank = self.control.Get_rank()
        self.size = self.control.Get_size()
        self.seq = 0
        self.notices: dict[int, dict] = {}
        self._sends: list[tuple[Any, bytes]] = []  # in flight, with their buffers
        self.announced = False
        self.gone: set[int] = set()
        # One receive buffer per peer, reused: a signature's data is read (copied) by
        # the caller before the next meeting.
        self._inbox: dict[int, bytearray] = {}
        self._native: tuple | None = None  # the C meeting, once built (see check)
        self._rank_arrays: dict[tuple[int, ...], tuple[np.ndarray, int]] = {}
        self._rows = np.empty(0, np.uint8)  # the C meeting's data, in the ranks' order
        self._rows_address = 0

    # --- meeting at a collective ----------------------------------------------------
    def check(self, what: str, ranks: Sequence[int], payload: bytes = b"") -> memoryview:
        """Meet the processes ``ranks`` (this one among them) at the collective ``what``;
        raise a DistributedError if one of them is elsewhere, failed, exited or too late.
        ``payload`` (at most ``INLINE_BYTES``) goes to every peer with the signature;
        returns every process's, in the order of ``ranks`` (valid until the next
        meeting)."""
        self.seq += 1
        if len(ranks) == 1:
            return memoryview(payload)
        if len(payload) > INLINE_BYTES:
            raise ValueError(f"a payload of {len(payload)} bytes does not fit with a "
                             f"signature (at most {INLINE_BYTES})")
        record = _record(self.seq, what, len(payload))
        native = self._native_meeting()
        if native is not None:
            return self._meet_natively(native, what, tuple(ranks), record, payload)
        return self._meet(what, ranks, record, payload)

    def _meet(self, what: str, ranks: Sequence[int], record: bytes,
              payload: bytes) -> memoryview:
        """The meeting through mpi4py, message by message."""
        others = [p for p in ranks if p != self.rank]
        for peer in others:
            self._send(record + payload, peer, TAG_SIGNATURE)
        buffers = {p: self._buffer(p) for p in others}
        pending = {p: self.control.Irecv(buffers[p], source=p, tag=TAG_SIGNATURE)
                   for p in others}

        def arrivals() -> Collection[int]:
            self._arrivals(pending, buffers, record, what, len(payload))
            return pending

        if arrivals():  # (peers usually come within microseconds: no notices read before)
            self._wait(what, arrivals)
        self._prune_sends()
        end = SIGNATURE_BYTES + len(payload)  # (the signatures agree on the size)
        return memoryview(b"".join(
            payload if p == self.rank else memoryview(buffers[p])[SIGNATURE_BYTES:end]
            for p in ranks))

    def _meet_natively(self, native: tuple, what: str, ranks: tuple[int, ...],
                       record: bytes, payload: bytes) -> memoryview:
        """The same meeting in C (``meeting.c``): one call where peers are on time."""
        library, state = native
        ranks_address = self._rank_array(ranks)
        size = len(payload) * len(ranks)
        if self._rows.nbytes < size:
            self._rows = np.empty(size, np.uint8)
            self._rows_address = self._rows.ctypes.data

        def outcome(status: int) -> Collection[int]:
            if status == PENDING:
                waiting = np.empty(len(ranks), np.int32)
                return waiting[:library.pending(state, waiting.ctypes.data)].tolist()
            if status > 0:
                peer = status - 1
                signature = ctypes.string_at(library.slot(state, peer), SIGNATURE_BYTES)
                self._compare(peer, bytearray(signature), what, len(payload))
                raise DistributedError(f"rank {peer}'s signature at collective #{self.seq} "
                                       f"({what}) differs from rank {self.rank}'s")
            if status < PENDING:
                raise self._failure(what, self.MPI.Exception(-2 - status))  # (its code)
            return ()

        status = library.start(state, ranks_address, len(ranks), record, payload,
                               len(payload), self._rows_address, _BUSY_SECONDS)
        if status != 0 and outcome(status):
            self._wait(what, lambda: outcome(library.poll(state, 0.0)))
        return memoryview(self._rows)[:size]

    def _native_meeting(self) -> tuple | None:
        """(the C meeting's library, this communicator's state) once it is built."""
        if self._native is None:
            from ember.distributed.native_meeting import meeting_state, native_meetings

            library = native_meetings()
            if library is None:
                return None
            self._native = (library, meeting_state(library, self.control, TAG_SIGNATURE,
                                                   SIGNATURE_BYTES, INLINE_BYTES))
        return self._native

    def _rank_array(self, ranks: tuple[int, ...]) -> int:
        """The address of ``ranks`` as C int32s, made once per group."""
        made = self._rank_arrays.get(ranks)
        if made is None:
            array = np.array(ranks, np.int32)
            made = self._rank_arrays[ranks] = (array, array.ctypes.data)
        return made[1]

    def _arrivals(self, pending: dict, buffers: dict, record: bytes, what: str,
                  size: int) -> None:
        """Removes from ``pending`` the peers whose signatures have come; raises where
        one differs from this process's ``record``."""
        for peer, request in list(pending.items()):
            if self._test(request, what):
                del pending[peer]
                if buffers[peer][:SIGNATURE_BYTES] != record:  # (one comparison)
                    self._compare(peer, buffers[peer], what, size)

    def _wait(self, what: str, arrivals: Callable[[], Collection[int]]) -> None:
        """Until ``arrivals()`` (tests again, returns the peers not come yet) is empty:
        notices from processes that raised or exited, and the timeout, end the wait
        with an error naming them."""
        pending = arrivals()
        if not pending:
            return
        self._read_notices(what, pending)
        start = time.monotonic()
        deadline = start + float(config.distributed_timeout)
        polls = 0
        while pending:
            polls += 1
            if polls % _POLLS_PER_NOTICE_READ == 0:  # notices matter only to a long wait
                self._read_notices(what, pending)
            if time.monotonic() > deadline:
                late = ", ".join(map(str, sorted(pending)))
                self._read_notices(what, pending)  # a peer that failed or left
                raise DistributedError(
                    f"rank {late} did not reach collective #{self.seq} ({what}) within "
                    f"{float(config.distributed_timeout):g} s (ember.config "
                    f"distributed_timeout); this is rank "
                    f"{self.rank}. A process may be stuck, or run a different program")
            waited = time.monotonic() - start
            if waited >= _SPIN_SECONDS:
                time.sleep(_POLL_SECONDS)
            elif waited >= _BUSY_SECONDS:
                os.sched_yield()
            pending = arrivals()

    def run(self, what: str, operation: Callable[[], Any]) -> Any:
        """Run an MPI data operation; a peer that dies during it is named."""
        try:
            return operation()
        except self.MPI.Exception as error:
            raise self._failure(what, error) from None

    # --- notices: a process that raised or exits tells the others -------------------
    def announce(self, kind: str, message: str, origin: int) -> None:
        """Tell every other process that this one stops ('failed' or 'left')."""
        if self.announced:
            return
        self.announced = True
        notice = json.dumps({"kind": kind, "message": message[:2000], "origin": origin,
                             "seq": self.seq}).encode()
        for peer in range(self.size):
            if peer != self.rank:
                try:
                    self._send(notice, peer, TAG_NOTICE)
                except self.MPI.Exception:
                    pass  # a process that is gone needs no notice
        deadline = time.monotonic() + 2.0
        while self._sends and time.monotonic() < deadline:
            self._prune_sends()
            time.sleep(0.001)

    def _read_notices(self, what: str, pending: Any) -> None:
        self._collect_notices()
        for source, notice in sorted(self.notices.items()):
            if notice["kind"] == "failed":
                origin = notice["origin"]
                raise PeerFailedError(
                    f"rank {origin} failed ({notice['message']}); rank {self.rank} stops "
                    f"at collective #{self.seq} ({what})", origin)
        for source, notice in sorted(self.notices.items()):
            if source in pending and notice["seq"] < self.seq:
                raise PeerFailedError(
                    f"rank {source} exited after {notice['seq']} collectives, before "
                    f"collective #{self.seq} ({what}) that rank {self.rank} waits for it "
                    "at", source)

    def _collect_notices(self) -> None:
        """Receive the notices that have arrived. Probed source by source: after a
        process failure MPI refuses receives from any source (ULFM)."""
        MPI = self.MPI
        status = MPI.Status()
        for source in range(self.size):
            if source == self.rank:
                continue
            try:
                while self.control.Iprobe(source=source, tag=TAG_NOTICE, status=status):
                    buffer = bytearray(status.Get_count(MPI.BYTE))
                    self.control.Recv([buffer, MPI.BYTE], source=source, tag=TAG_NOTICE)
                    self.notices[source] = json.loads(buffer.decode())
            except MPI.Exception:
                self.gone.add(source)  # a process that is gone; _failed_ranks names it

    def wait_for_peers(self, seconds: float) -> None:
        """Until every other process has sent a notice or is gone (at most ``seconds``):
        a failing process lingers so that MPI does not end the others before they have
        reported the failure."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._collect_notices()
            self.gone.update(self._failed_ranks())
            if len(set(self.notices) | self.gone | {self.rank}) >= self.size:
                return
            time.sleep(0.01)

    # --- helpers --------------------------------------------------------------------
    def _buffer(self, peer: int) -> bytearray:
        buffer = self._inbox.get(peer)
        if buffer is None:
            buffer = self._inbox[peer] = bytearray(SIGNATURE_BYTES + INLINE_BYTES)
        return buffer

    def _send(self, payload: bytes, peer: int, tag: int) -> None:
        request = self.control.Isend([payload, self.MPI.BYTE], dest=peer, tag=tag)
        self._sends.append((request, payload))

    def _prune_sends(self) -> None:
        kept = []
        for request, payload in self._sends:
            try:
                done = request.Test()
            except self.MPI.Exception:
                done = True  # to a process that is gone: nothing left to deliver
            if not done:
                kept.append((request, payload))
        self._sends = kept

    def _test(self, request: Any, what: str) -> bool:
        try:
            return request.Test()
        except self.MPI.Exception as error:
            raise self._failure(what, error) from None

    def _compare(self, peer: int, buffer: bytearray, what: str, size: int) -> None:
        """Raise the error for a peer whose signature differs from this process's."""
        seq, nbytes, at = bytes(buffer[:SIGNATURE_BYTES]).rstrip(b"\0").split(b"\0", 2)
        theirs = {"seq": int(seq), "bytes": int(nbytes), "what": at.decode(errors="replace")}
        if (theirs["seq"] != self.seq or theirs["what"] != _short(what)
                or theirs["bytes"] != size):
            raise DistributedError(
                f"processes disagree at a collective: rank {self.rank} is at collective "
                f"#{self.seq}: {_short(what)}, but rank {peer} is at collective "
                f"#{theirs['seq']}: {theirs['what']}. Every process must run the same "
                "program on arrays of the same shapes and dtypes")

    def _failure(self, what: str, error: Exception) -> DistributedError:
        """The error for an MPI failure report: a notice that explains it, else the
        processes MPI found gone."""
        try:
            self._read_notices(what, ())
        except DistributedError as noticed:
            return noticed
        failed = self._failed_ranks()
        named = f"rank {', '.join(map(str, failed))}" if failed else "a process"
        return PeerFailedError(
            f"{named} died (MPI reports: {error}) during collective #{self.seq} ({what}); "
            f"rank {self.rank} stops", failed[0] if failed else -1)

    def _failed_ranks(self) -> list[int]:
        try:
            group = self.control.Get_failed()
            ranks = self.MPI.Group.Translate_ranks(group, list(range(group.Get_size())),
                                                   self.control.Get_group())
            return sorted(int(r) for r in ranks)
        except (self.MPI.Exception, NotImplementedError, AttributeError):
            return []


def _short(what: str) -> str:
    return what if len(what) <= 400 else what[:400] + "..."


def _record(seq: int, what: str, size: int) -> bytes:
    """The signature: sequence number, data size and the collective's description,
    NUL-separated, padded to ``SIGNATURE_BYTES`` (equal records: the same collective)."""
    record = str(seq).encode() + _record_tail(what, size)
    return record.ljust(SIGNATURE_BYTES, b"\0")[:SIGNATURE_BYTES]


@functools.lru_cache(maxsize=1024)  # a program's collectives repeat every step
def _record_tail(what: str, size: int) -> bytes:
    return f"\0{size}\0{_short(what)}".encode()


def install_exit_hooks(guard: Guard) -> None:
    """An uncaught exception tells the other processes before this one exits; a normal
    exit tells them how many collectives this process took part in."""
    import atexit

    previous = sys.excepthook

    def on_error(kind: type, value: BaseException, tb: Any) -> None:
        from ember.distributed.exit_status import record_exit

        origin = value.origin if isinstance(value, PeerFailedError) else guard.rank
        guard.announce("failed", f"{kind.__name__}: {value}", origin)
        previous(kind, value, tb)
        record_exit(1)
        sys.stdout.flush()
        sys.stderr.flush()
        guard.wait_for_peers(float(config.distributed_timeout))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # MPI_Finalize would wait for processes that are gone

    sys.excepthook = on_error
    atexit.register(lambda: guard.announce("left", "", guard.rank))
