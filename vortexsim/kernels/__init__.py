"""Cutoff kernels of the regularized Biot–Savart law and their direct sums.

``cutoff``  reference (NumPy/CuPy array) formulas: the specification.
``direct``  blocked NumPy direct sum and the CUDA tiled direct sum.
``modules`` lazy, per-device compilation of the CUDA sources in ``cuda/``.
"""
from .cutoff import KERNELS, CutoffKernel, get_kernel, stretching

__all__ = ["KERNELS", "CutoffKernel", "get_kernel", "stretching"]
