"""initialize's arguments and launch detection, checked before any process starts."""
from __future__ import annotations

import pytest

import ember
from ember.distributed import initialize
from ember.distributed.environment import detect_launch
from ember.distributed.errors import DistributedError


@pytest.mark.parametrize("kwargs, message", [
    ({"coordinator_address": "127.0.0.1:1234"}, "pass num_processes, process_id too"),
    ({"num_processes": 2, "process_id": 0}, "pass coordinator_address too"),
    ({"coordinator_address": "h:1", "num_processes": 0, "process_id": 0},
     "num_processes must be a positive int"),
    ({"coordinator_address": "h:1", "num_processes": 2, "process_id": 2},
     "process_id must be an int in 0..1"),
    ({"coordinator_address": "h:1", "num_processes": 2, "process_id": 0,
      "local_device_ids": [0, 0]}, "local_device_ids=.* must be distinct"),
])
def test_bad_arguments_are_clear_errors(kwargs, message):
    with pytest.raises(DistributedError, match=message):
        initialize(**kwargs)
    assert not ember.distributed.is_initialized()


def test_arguments_that_contradict_the_launcher(monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    with pytest.raises(DistributedError, match="process_id=2, but Open MPI"):
        initialize(process_id=2)


@pytest.mark.parametrize("environ, expected", [
    ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4"}, ("Open MPI", 2, 4)),
    ({"PMI_RANK": "1", "PMI_SIZE": "3"}, ("MPICH", 1, 3)),
    ({"SLURM_PROCID": "5", "SLURM_NTASKS": "8"}, ("Slurm", 5, 8)),
    # mpirun started inside a Slurm allocation: mpirun's own numbers win
    ({"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "OMPI_COMM_WORLD_RANK": "3",
      "OMPI_COMM_WORLD_SIZE": "4"}, ("Open MPI", 3, 4)),
])
def test_launch_detection(environ, expected):
    launch = detect_launch(environ)
    assert launch.launcher.startswith(expected[0])
    assert (launch.process_id, launch.num_processes) == expected[1:]


def test_a_process_started_by_hand_is_no_launch():
    assert detect_launch({"PATH": "/usr/bin"}) is None


def test_one_process_without_initialize():
    assert ember.process_index() == 0 and ember.process_count() == 1
    assert ember.local_devices() == ember.devices(ember.default_backend())
    assert all(d.process_index == 0 for d in ember.devices("cpu"))
