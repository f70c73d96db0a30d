"""The physics of a vortex-particle simulation, between the fast summation and the time loop.

* :mod:`.domain`: free space, the ground plane by images, the periodic box:
  sources, checks, the box of the images and the FMM root cube
* :mod:`.summation`: the summation strategy (direct sum or a reusable FMM) on the device
* :mod:`.planner`: FMM policy of a run (root cube, depth and its refresh, M2L sizes)
* :mod:`.rhs`: the right-hand side as a list of terms (stretching, viscous diffusion)
* :mod:`.remesh`: remeshing onto a lattice with M4′ (free space or the periodic box);
  not re-exported here, so that ``vortexsim.physics.remesh`` stays the module
* :mod:`.pse`: viscous diffusion by particle strength exchange (the operator, CPU)
"""
from .domain import BOUNDARIES, Domain, FreeSpace, GroundPlane, make_domain, mirror
from .planner import FMMPlanner, StepPlan
from .pse import pse_rate
from .rhs import VortexRHS
from .summation import Summation

__all__ = ["BOUNDARIES", "Domain", "FreeSpace", "GroundPlane", "make_domain", "mirror",
           "FMMPlanner", "StepPlan", "VortexRHS", "Summation", "pse_rate"]
