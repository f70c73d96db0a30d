"""The machine under the computation: devices and array namespaces
(:mod:`~vortexsim.backend.device`), memory queries (:mod:`~vortexsim.backend.memory`) and
the communicator between processes (:mod:`~vortexsim.backend.communicator`; MPI ranks:
:mod:`~vortexsim.backend.mpi`, GPU ranks with NCCL: :mod:`~vortexsim.backend.nccl`).

CuPy is optional: ``import vortexsim`` never imports it eagerly.
"""
from .communicator import Communicator, SingleProcess
from .device import (DEVICE_NAMES, PRECISIONS, Device, array_namespace, check_precision,
                     device_kind, gpu_available, import_cupy, is_cupy_array, resolve_device,
                     host_copy, select_gpu, stable_argsort, to_device, to_host)
from .mpi import MPICommunicator
from .world import make_communicator
from .nccl import NCCLCommunicator

__all__ = ["PRECISIONS", "DEVICE_NAMES", "check_precision", "Device", "resolve_device",
           "device_kind", "array_namespace", "to_host", "host_copy", "to_device", "gpu_available",
           "is_cupy_array", "import_cupy", "stable_argsort", "select_gpu", "Communicator",
           "SingleProcess", "MPICommunicator", "NCCLCommunicator", "make_communicator"]
