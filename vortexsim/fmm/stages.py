"""The stages of one evaluator on one backend, chosen once from its device.

:func:`make_stages` returns the NumPy implementations (:mod:`~vortexsim.fmm.near`,
:mod:`~vortexsim.fmm.upward`, :mod:`~vortexsim.fmm.m2l`, :mod:`~vortexsim.fmm.downward`)
on the CPU and their CUDA twins (:mod:`vortexsim.fmm.cuda`) on the GPU, with the same
call signatures; the evaluator and the adaptive pass call them without asking which.
"""
from __future__ import annotations

import typing

from . import cuda
from .downward import Downward
from .m2l import M2L
from .near import NearField, SerialLanes
from .operators import Cache, Operators
from .plan import host_memory
from .upward import Upward

__all__ = ["Stages", "HostBackend", "make_stages"]


class HostBackend:
    """Device services of the NumPy stages: one thread of work, host memory."""

    kind = "cpu"

    def near_lanes(self, n, sync):
        """Runs each target set's near field in turn (see :class:`cuda.NearLanes`)."""
        return SerialLanes()

    def side_stream(self, sync):
        """No second stream on the CPU."""
        return None

    def host_floats(self, values):
        """Python floats of NumPy scalars ``values``."""
        return [float(v) for v in values]

    def total_memory(self):
        """The host's RAM [bytes]."""
        return host_memory()


class Stages(typing.NamedTuple):
    """An evaluator's stage objects (all sharing one :class:`Cache`)."""

    backend: object            # HostBackend or cuda.CudaBackend: streams, host scalars
    operators: Operators       # M2M/L2L operators, harmonic bases, box centres
    near: NearField            # near field of the leaves' stencils
    upward: Upward             # P2M, M2M
    m2l: M2L                   # dense and sparse M2L
    downward: Downward         # L2L, L2P


def make_stages(device, kernel, dtype, tol, separation, near_radius, chunk_bytes):
    """The :class:`Stages` of an evaluator on ``device``: kernel (cutoff kernel), dtype
    (near-field precision), tol, separation, near_radius (see :class:`FMM`) and
    chunk_bytes (the M2L's work-array budget [bytes])."""
    cache = Cache(device)
    operators = Operators(device, cache)
    if device.is_gpu:
        backend = cuda.CudaBackend(cache)
        near, upward, m2l, downward = (cuda.CudaNearField, cuda.CudaUpward, cuda.CudaM2L,
                                       cuda.CudaDownward)
    else:
        backend = HostBackend()
        near, upward, m2l, downward = NearField, Upward, M2L, Downward
    return Stages(backend, operators, near(kernel, dtype, tol, near_radius, cache),
                  upward(operators), m2l(operators, separation, near_radius, dtype, tol,
                                         chunk_bytes), downward(operators))
