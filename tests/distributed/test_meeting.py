"""The guard's meeting in C and through mpi4py are interchangeable: the same messages,
the same results, processes may differ in which one they use."""
from __future__ import annotations

import pytest

from tests.distributed.conftest import launch, needs_mpi


@pytest.mark.parametrize("processes, others", [(2, "native"), (3, "python")])
def test_small_collectives_agree_in_c_and_through_mpi4py(processes, others):
    needs_mpi()
    done = launch(processes, "meeting.py", others, deadline=180)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    if "no native meeting" in output:
        pytest.skip("the C meeting cannot be built here (no compiler or no mpi.h)")
    assert "[rank 0] meetings agree; process 0 met in C" in output, output
    kind = "in C" if others == "native" else "through mpi4py"
    assert f"[rank 1] meetings agree; process 1 met {kind}" in output, output


def test_the_c_meeting_is_built_only_against_the_loaded_mpis_header():
    from ember.distributed.native_meeting import same_mpi

    open_mpi = "#define OPEN_MPI 1\n#define OMPI_MAJOR_VERSION 5\n"
    mpich = '#define MPICH_VERSION "4.2.0"\n'
    assert same_mpi(open_mpi, "Open MPI v5.0.11, package: Open MPI")
    assert same_mpi(mpich, "MPICH Version: 4.2.0")
    assert not same_mpi(open_mpi, "MPICH Version: 4.2.0")  # would crash: another ABI
    assert not same_mpi(mpich, "Open MPI v5.0.11")
