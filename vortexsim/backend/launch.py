"""How a process tells that an MPI launcher started it among several ranks, from its
environment alone: :func:`launched_ranks` reads the rank count that the launchers put
into each process's environment (Open MPI's ``OMPI_COMM_WORLD_SIZE``, MPICH/Hydra's
``PMI_SIZE``, PMIx's ``PMIX_SIZE``…) and :func:`local_rank` the node-local rank (the GPU
a rank takes), without initialising MPI, so that a plain ``vortexsim run`` never imports
mpi4py.
"""
from __future__ import annotations

import os

__all__ = ["launched_ranks", "local_rank", "SIZE_VARIABLES", "LOCAL_RANK_VARIABLES"]

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
