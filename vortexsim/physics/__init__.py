"""The physics of a vortex-particle simulation, between the fast summation and the time loop.

* :mod:`.rhs`: the right-hand side as a list of terms (stretching, viscous diffusion)
* :mod:`.remesh`: remeshing onto a lattice with M4′ (free space or the periodic box);
  not re-exported here, so that ``vortexsim.physics.remesh`` stays the module
* :mod:`.pse`: viscous diffusion by particle strength exchange (the operator, CPU)

The domains live in :mod:`vortexsim.geometry`, the summations and the FMM's step plans in
:mod:`vortexsim.summation`; they are re-exported here for the simulation
(``Summation(method, ...)`` is :func:`vortexsim.summation.make_summation`).
"""
from ..geometry import BOUNDARIES, Domain, FreeSpace, GroundPlane, make_domain, mirror
from ..summation import FMMPlanner, StepPlan
from ..summation import make_summation as Summation
from .pse import pse_rate
from .rhs import VortexRHS

__all__ = ["BOUNDARIES", "Domain", "FreeSpace", "GroundPlane", "make_domain", "mirror",
           "FMMPlanner", "StepPlan", "VortexRHS", "Summation", "pse_rate"]
