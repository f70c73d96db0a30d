"""vortexsim: vortex-particle simulation of incompressible flow.

Public API
----------
induced_velocity  velocity and velocity gradient of regularized vortex elements
KERNELS           the cutoff kernels (physics.md)
stretching        vortex-stretching right-hand side (classical | transpose)
Device            compute device (cpu | gpu)
"""
from .backend import Device
from .kernels.cutoff import KERNELS, get_kernel, stretching
from .summation import induced_velocity

__version__ = "0.1.0"

__all__ = ["induced_velocity", "KERNELS", "get_kernel", "stretching", "Device", "__version__"]
