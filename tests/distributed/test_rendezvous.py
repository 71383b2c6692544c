"""The coordinator of an explicit initialize admits only processes that prove the job's
secret; a stranger is turned away and the job still forms."""
from __future__ import annotations

import socket
import struct
import threading

import pytest

from ember.distributed import rendezvous
from ember.distributed.errors import DistributedError

SECRET = b"the job's secret"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve(address: str, result: dict) -> threading.Thread:
    def run():
        try:
            result["everyone"] = rendezvous.serve(address, SECRET, {"process_id": 0}, 2, 20)
        except Exception as error:  # handed to the test
            result["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _stranger(address: str, proof: bytes) -> bytes:
    """Connect, answer the challenge with ``proof``; what the coordinator says back."""
    host, port = rendezvous.parse_address(address)
    with socket.create_connection((host, port), timeout=5) as sock:
        (size,) = struct.unpack("!I", sock.recv(4))
        sock.recv(size)  # the challenge
        sock.sendall(struct.pack("!I", len(proof)) + proof)
        try:
            return sock.recv(64)
        except ConnectionError:
            return b""


def test_stranger_is_refused_and_the_job_still_forms():
    address = f"127.0.0.1:{_free_port()}"
    result: dict = {}
    thread = _serve(address, result)
    hello = {"process_id": 1, "num_processes": 2}
    # A stranger who does not know the secret: turned away without a word.
    for attempt in range(50):
        try:
            answer = _stranger(address, b"x" * 64)
            break
        except ConnectionRefusedError:
            threading.Event().wait(0.1)
    assert answer == b""
    everyone = rendezvous.join(address, SECRET, hello, timeout=10)
    thread.join(10)
    assert "error" not in result
    assert [p["process_id"] for p in everyone] == [0, 1]
    assert result["everyone"] == everyone  # the stranger is not among them


def test_peer_with_another_secret_cannot_join():
    address = f"127.0.0.1:{_free_port()}"
    result: dict = {}
    _serve(address, result)
    with pytest.raises(DistributedError, match="cannot reach the coordinator"):
        rendezvous.join(address, b"another job's secret", {"process_id": 1,
                                                            "num_processes": 2}, timeout=2)


def test_coordinator_rejects_a_duplicate_or_disagreeing_process():
    address = f"127.0.0.1:{_free_port()}"
    result: dict = {}
    thread = _serve(address, result)
    with pytest.raises(DistributedError, match="num_processes=3, process 0 says 2"):
        rendezvous.join(address, SECRET, {"process_id": 1, "num_processes": 3}, timeout=10)
    thread.join(10)
    assert "num_processes=3" in str(result["error"])


@pytest.mark.parametrize("address", ["localhost", "host:port", ":80", "h:0", "h:70000"])
def test_bad_address_is_a_clear_error(address):
    with pytest.raises(DistributedError, match="must be 'host:port'"):
        rendezvous.parse_address(address)


def test_listener_binds_only_the_given_address():
    address = f"127.0.0.1:{_free_port()}"
    result: dict = {}
    _serve(address, result)
    host, port = rendezvous.parse_address(address)
    for attempt in range(50):  # wait until it listens
        try:
            socket.create_connection((host, port), timeout=1).close()
            break
        except ConnectionRefusedError:
            threading.Event().wait(0.1)
    with pytest.raises(OSError):  # another address of this host: nobody listens there
        socket.create_connection(("127.0.0.2", port), timeout=1).close()
