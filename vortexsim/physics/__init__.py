"""The physics of a vortex-particle simulation, between the fast summation and the model.

* :mod:`.rhs`: the right-hand side (:class:`VortexRHS`): one summation per stage, the
  rates of α as the sum of its terms
* :mod:`.terms`: the terms (stretching, core spreading, PSE, lattice diffusion)
* :mod:`.remesh_groups`: remeshing labelled groups onto one lattice (free space, a
  ground plane); the M4′ interpolation itself is :mod:`vortexsim.geometry.remesh`, below
  the summations, which the particle-mesh solve shares
* :mod:`.pse`, :mod:`.pse_lattice`, :mod:`.pse_gpu`: viscous diffusion by particle
  strength exchange; :mod:`.lattice_viscosity`: exact diffusion on the periodic lattice;
  :mod:`.projection`: the solenoidal projection of lattice strengths

The domains live in :mod:`vortexsim.geometry`, the summations and the FMM's step plans in
:mod:`vortexsim.summation`.
"""
from .pse import pse_rate
from .rhs import VortexRHS
from .terms import PSE, CoreSpreading, LatticeDiffusion, Stage, Stretching, Term

__all__ = ["VortexRHS", "Term", "Stage", "Stretching", "CoreSpreading", "PSE",
           "LatticeDiffusion", "pse_rate"]
