"""vortexsim: vortex-particle simulation of incompressible flow.

Public API
----------
induced_velocity  velocity and velocity gradient of regularized vortex elements
FMM               reusable fast multipole evaluator (CPU and GPU)
KERNELS           the cutoff kernels (physics.md)
stretching        vortex-stretching right-hand side (classical | transpose)
Device            compute device (cpu | gpu)
"""
from .backend import Device
from .kernels.cutoff import KERNELS, get_kernel, stretching
from .fmm.evaluator import FMM
from .summation import induced_velocity

__version__ = "0.1.0"

__all__ = ["induced_velocity", "FMM", "KERNELS", "get_kernel", "stretching", "Device", "__version__"]
