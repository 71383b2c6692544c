"""Every test here sees the host split into 8 CPU devices, and a mesh over them."""
from __future__ import annotations

import pytest

import ember


@pytest.fixture(autouse=True)
def _eight_cpu_devices():
    with ember.config.override(num_cpu_devices=8):
        yield


def host_devices(backend: str) -> list:
    """8 devices for a mesh: the backend's own where it has 8 (cpu, reference), else
    the host's (PoCL offers one OpenCL device; the program still runs on OpenCL)."""
    found = ember.devices(backend)
    return found if len(found) >= 8 else ember.devices("reference")


@pytest.fixture
def mesh_devices(backend):
    return host_devices(backend)


@pytest.fixture
def mesh8(backend):
    return ember.make_mesh((8,), ("i",), devices=host_devices(backend))


@pytest.fixture
def mesh42(backend):
    return ember.make_mesh((4, 2), ("data", "model"), devices=host_devices(backend))
