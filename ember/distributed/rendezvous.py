"""The coordinator of an explicit ``initialize``: process 0 listens on the address it
is given, the others report to it, and it checks that they form one job.

It carries no array data, only who is who. A connection is admitted only after it
proves it knows the job's shared secret (an HMAC of a fresh challenge, both ways), so a
stranger on the network can neither join the job nor tell it anything.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import socket
import struct
import time

from ember.distributed.errors import DistributedError

__all__ = ["join", "parse_address", "serve"]

_NONCE = 32
_MAX_MESSAGE = 1 << 16


def parse_address(address: str) -> tuple[str, int]:
    host, sep, port = str(address).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DistributedError(f"coordinator_address {address!r} must be 'host:port' with "
                               "a port from 1 to 65535, e.g. '10.0.0.1:7777'")
    return host.strip("[]"), int(port)


def _proof(secret: bytes, nonce: bytes, role: bytes) -> bytes:
    return hmac.new(secret, role + nonce, hashlib.sha256).digest()


def _send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack("!I", len(payload)) + payload)


def _receive(sock: socket.socket) -> bytes:
    (size,) = struct.unpack("!I", _exactly(sock, 4))
    if size > _MAX_MESSAGE:
        raise ConnectionError("message too large")
    return _exactly(sock, size)


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        part = sock.recv(size - len(data))
        if not part:
            raise ConnectionError("connection closed")
        data += part
    return data


def _admit(sock: socket.socket, secret: bytes) -> dict | None:
    """The hello of a peer that proves it knows ``secret``; None for a stranger."""
    try:
        challenge = os.urandom(_NONCE)
        _send(sock, challenge)
        theirs = _receive(sock)  # their proof, then their own challenge
        if len(theirs) != 32 + _NONCE or not hmac.compare_digest(
                theirs[:32], _proof(secret, challenge, b"peer")):
            return None
        _send(sock, _proof(secret, theirs[32:], b"coordinator"))
        return json.loads(_receive(sock).decode())
    except (OSError, ConnectionError, ValueError):
        return None


def serve(address: str, secret: bytes, hello: dict, num_processes: int,
          timeout: float) -> list[dict]:
    """Process 0: listen on ``address`` (only there) until the other processes have
    joined; each gets the list of every process's hello. Strangers are turned away."""
    host, port = parse_address(address)
    try:
        listener = socket.create_server((host, port), reuse_port=False)
    except OSError as error:
        raise DistributedError(f"process 0 cannot listen on coordinator_address "
                               f"{address!r} ({error}); it must be an address of process "
                               "0's own host with a free port") from None
    peers: dict[int, tuple[socket.socket, dict]] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(peers) < num_processes - 1:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(set(range(1, num_processes)) - set(peers))
                raise DistributedError(
                    f"process {', '.join(map(str, missing))} did not join the coordinator "
                    f"at {address} within {timeout:g} s (ember.config distributed_timeout)")
            listener.settimeout(left)
            try:
                sock, _ = listener.accept()
            except socket.timeout:
                continue
            sock.settimeout(min(left, 10.0))
            joined = _admit(sock, secret)
            if joined is None:
                sock.close()  # a stranger, or a peer of another job
                continue
            problem = _problem(joined, num_processes, peers)
            if problem:
                _send(sock, json.dumps({"error": problem}).encode())
                sock.close()
                raise DistributedError(f"initialize: {problem}")
            peers[joined["process_id"]] = (sock, joined)
        everyone = [hello] + [peers[i][1] for i in sorted(peers)]
        for sock, _ in peers.values():
            _send(sock, json.dumps({"processes": everyone}).encode())
        return everyone
    finally:
        for sock, _ in peers.values():
            sock.close()
        listener.close()


def _problem(joined: dict, num_processes: int, peers: dict) -> str | None:
    pid = joined.get("process_id")
    if joined.get("num_processes") != num_processes:
        return (f"process {pid} says num_processes={joined.get('num_processes')}, "
                f"process 0 says {num_processes}; pass the same on every process")
    if not isinstance(pid, int) or not 0 < pid < num_processes:
        return f"process_id {pid!r} is not in 1..{num_processes - 1} (0 is the coordinator)"
    if pid in peers:
        return f"two processes say process_id={pid}; each needs its own"
    return None


def join(address: str, secret: bytes, hello: dict, timeout: float) -> list[dict]:
    """Processes other than 0: report to the coordinator at ``address``, prove the
    secret, check that it knows it too, and get every process's hello."""
    host, port = parse_address(address)
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=2.0) as sock:
                sock.settimeout(max(deadline - time.monotonic(), 1.0))
                challenge = _receive(sock)
                mine = os.urandom(_NONCE)
                _send(sock, _proof(secret, challenge, b"peer") + mine)
                if not hmac.compare_digest(_receive(sock),
                                           _proof(secret, mine, b"coordinator")):
                    raise DistributedError(f"the coordinator at {address} does not know "
                                           "this job's secret: it belongs to another job")
                _send(sock, json.dumps(hello).encode())
                answer = json.loads(_receive(sock).decode())
        except (OSError, ConnectionError) as error:
            last = error
            time.sleep(0.2)
            continue
        if "error" in answer:
            raise DistributedError(f"initialize: {answer['error']}")
        return answer["processes"]
    raise DistributedError(f"cannot reach the coordinator at {address} within {timeout:g} s "
                           f"({last}); check coordinator_address: process 0 listens there")


def new_secret() -> str:
    return secrets.token_hex(16)


def secret_from_environment() -> bytes:
    value = os.environ.get("EMBER_JOB_SECRET", "")
    if not value:
        raise DistributedError("initialize(coordinator_address=...) needs the job's shared "
                               "secret in EMBER_JOB_SECRET, the same random string on every "
                               "process (`ember launch` sets it; e.g. `export EMBER_JOB_SECRET"
                               "=$(python -c 'import secrets; print(secrets.token_hex())')`)")
    return value.encode()
