"""Fast multipole method for the regularized Biot–Savart law (design: docs/fmm-design.md).

One module per stage (exafmm's layout); :class:`~vortexsim.fmm.evaluator.FMM` runs them:

``evaluator``   the :class:`FMM` facade: plan, then execute
``plan``        order and reach rules, cost model and depth choice, :class:`Plan`, step plans
``tree``        level-uniform octree from Morton keys (dense box arrays, no host round trips)
``adaptive``    adaptive octree and its evaluation pass (clustered inputs)
``near``        near field: direct pair sums over each leaf's stencil
``upward``      P2M, M2M
``m2l``         M2L: dense per parity class, sparse over non-empty boxes (GPU)
``downward``    L2L, L2P
``periodic``    the periodic box: wrapped points, ghost sources, far lattice, tin-foil shift
``operators``   M2M/L2L operators, harmonic bases, the evaluator's cache
``expansions``  Cartesian Taylor expansions of the (regularized) vector potential:
                P2M, M2M, M2L, L2L, L2P, M2P as array code for NumPy and CuPy
``stages``      the stage objects of one device (NumPy or CUDA), chosen once
``cuda``        the CUDA implementations of the stages (CuPy imported on use only)
``timing``      stage timer
"""
from .evaluator import FMM
from .plan import FMMConfig, M2LPlan, Plan

__all__ = ["FMM", "FMMConfig", "M2LPlan", "Plan"]
