"""The signature processes compare at a collective: equal records for the same
collective (one byte comparison), and an error naming both sides for a different one.
(That processes meet through it is the failure tests' part.)"""
from __future__ import annotations

import pytest

from ember.distributed.errors import DistributedError
from ember.distributed.guard import SIGNATURE_BYTES, Guard, _record


def _guard(rank: int, seq: int) -> Guard:
    guard = object.__new__(Guard)  # (no MPI: only the comparison is tested)
    guard.rank, guard.seq = rank, seq
    return guard


def test_the_same_collective_has_the_same_record():
    what = "psum over mesh axis 'data' in shard_map of step(f32[4,8])"
    assert _record(3, what, 128) == _record(3, what, 128)
    assert len(_record(3, what * 20, 128)) == SIGNATURE_BYTES
    assert _record(3, what, 128) != _record(4, what, 128)
    assert _record(3, what, 128) != _record(3, what, 64)
    assert _record(3, what, 128) != _record(3, what.replace("4,8", "2,8"), 128)


def test_a_different_collective_names_both_sides():
    theirs = bytearray(_record(7, "reduce(sum) of float32[2,8]", 64))
    with pytest.raises(DistributedError) as error:
        _guard(0, 7)._compare(1, theirs, "reduce(sum) of float32[4,8]", 128)
    message = str(error.value)
    assert "rank 0 is at collective #7: reduce(sum) of float32[4,8]" in message
    assert "rank 1 is at collective #7: reduce(sum) of float32[2,8]" in message


def test_a_mismatch_is_named_before_the_peers_report_of_it():
    """The peer that found the mismatch raised and sent a notice after its signature;
    where the probe for notices is what brought both in, the survivor still names the
    mismatch (the race behind a flaky failure test)."""
    guard = _guard(0, 1)
    guard.notices = {}

    def notice_comes() -> None:
        guard.notices[1] = {"kind": "failed", "origin": 1, "seq": 1,
                            "message": "DistributedError: processes disagree"}

    guard._collect_notices = notice_comes
    theirs = bytearray(_record(1, "reduce(sum) of float32[6,3]", 4))
    tests = iter([[1]])  # the first test finds nothing; the next finds the signature

    def arrivals() -> list[int]:
        pending = next(tests, None)
        if pending is None:
            guard._compare(1, theirs, "reduce(sum) of float32[4,3]", 4)
        return pending

    with pytest.raises(DistributedError) as error:
        guard._wait("reduce(sum) of float32[4,3]", arrivals)
    assert "but rank 1 is at collective #1: reduce(sum) of float32[6,3]" in str(error.value)
