"""The communicator of this process (:func:`make_communicator`): one process, MPI ranks
on CPUs (:class:`.mpi.MPICommunicator`) or GPU ranks with NCCL
(:class:`.nccl.NCCLCommunicator`), by how the process was started and on which device
it runs.
"""
from __future__ import annotations

import logging

from .communicator import SingleProcess
from .device import device_kind, select_gpu
from .launch import launched_ranks
from .mpi import MPICommunicator
from .nccl import NCCLCommunicator, nccl_available

logger = logging.getLogger(__name__)

__all__ = ["make_communicator"]


def make_communicator(environ=None, device=None):
    """The communicator of this process: :class:`SingleProcess` unless a launcher
    started it among several ranks; then, when ``device`` (a name or a
    :class:`~vortexsim.backend.device.Device`; None: the CPU) is a GPU and CuPy's NCCL
    binding loads, :class:`vortexsim.backend.nccl.NCCLCommunicator` (device-array
    collectives; the rank's GPU, ``local_rank() % device count``, made current first:
    :func:`vortexsim.backend.device.select_gpu`), else :class:`MPICommunicator` (an
    ImportError naming the ``mpi`` extra when mpi4py is missing).  ``environ``: the
    environment to read (default ``os.environ``)."""
    if launched_ranks(environ) <= 1:
        return SingleProcess()
    if device is not None:
        if device_kind(device) == "gpu":
            select_gpu(environ)                     # before NCCL takes the current GPU
            if nccl_available():
                return NCCLCommunicator()
            logger.warning("GPU ranks without NCCL (cupy.cuda.nccl does not load): the "
                           "ranks' device arrays go through the host over MPI.")
    return MPICommunicator()
