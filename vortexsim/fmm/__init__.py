"""Fast multipole method for the regularized Biot–Savart law (design: docs/fmm-design.md).

``tree``        level-uniform octree from Morton keys (dense box arrays, no host round trips)
``expansions``  Cartesian Taylor expansions of the (regularized) vector potential:
                P2M, M2M, M2L, L2L, L2P, M2P as array code for NumPy and CuPy
"""
