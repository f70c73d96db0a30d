"""Velocity summation: one interface, one class per method, the one ``"auto"`` rule.

Between the FMM and the physics.

* :mod:`.base`: the interface :class:`Summation` (u and ∇u with the self pairs removed,
  the field sums, ``describe``, ``memory_estimate``, ``state_dict``) and where new
  methods (a particle-mesh solve, distributed versions) plug in;
* :mod:`.direct` (:class:`DirectSum`), :mod:`.fmm` (:class:`FMMSum`, free or periodic,
  with its :class:`FMMPlanner` and :class:`StepPlan`), :mod:`.periodic_spectral`
  (:class:`PeriodicSpectralSum`): the siblings;
* :mod:`.spectral` (:class:`SpectralSum`: the periodic box's Fourier series by
  non-uniform FFTs) and :mod:`.lattice` (:class:`LatticeSum`: the same series at the
  nodes of the box's lattice by plain FFTs);
* :mod:`.auto`: :func:`choose_method`, the rule of ``method="auto"``;
* :mod:`.factory`: :func:`make_summation` and the registry :data:`SUMMATIONS`;
* :mod:`.api`: :func:`induced_velocity`, the public functional call.
"""
from .api import CALL_METHODS, METHODS, PRECISIONS, induced_velocity
from .auto import (AUTO_FMM_PAIRS_CPU, AUTO_FMM_PAIRS_GPU, PERIODIC_FMM_KERNELS,
                   choose_method)
from .base import Summation
from .direct import DirectSum
from .factory import PLANNED, SUMMATIONS, make_summation
from .fmm import DEPTH_REFRESH, FMMPlanner, FMMSum, StepPlan
from .lattice import LatticeSum
from .periodic_spectral import PeriodicSpectralSum
from .spectral import FIELD_SUMS, SpectralSum, spectral_velocity

__all__ = ["induced_velocity", "METHODS", "CALL_METHODS", "PRECISIONS", "choose_method",
           "AUTO_FMM_PAIRS_CPU", "AUTO_FMM_PAIRS_GPU", "PERIODIC_FMM_KERNELS", "Summation",
           "DirectSum", "FMMSum", "PeriodicSpectralSum", "FMMPlanner", "StepPlan",
           "DEPTH_REFRESH", "make_summation", "SUMMATIONS", "PLANNED", "SpectralSum",
           "LatticeSum", "FIELD_SUMS", "spectral_velocity"]
