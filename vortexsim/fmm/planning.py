r"""The plan of one FMM evaluation: the tree kind, order, reach, root cube and depth.

:meth:`vortexsim.fmm.evaluator.FMM.plan` (and ``evaluate``) turn the points into a
:class:`~vortexsim.fmm.plan.Plan` here, before anything is summed: in free space
(:func:`plan_free_space`: the bounding or given root cube, the level-uniform or the
adaptive tree, the depth of least modelled cost) or in the periodic box
(:func:`plan_periodic`: the root is the box).  The rules behind the choices are the
evaluator's :class:`~vortexsim.fmm.plan.Planner` (docs/fmm-design.md).
"""
from __future__ import annotations

import math

import numpy as np

from . import expansions as E
from .near import near_field_reach
from .periodic import PERIODIC_LEAF_SLACK, PERIODIC_MIN_DEPTH
from .plan import (ADAPTIVE_LEAF_SIZE, Plan, depth_counts, gradient_count,
                   near_pairs_by_depth, stretched_width)
from .tree import choose_depth, root_cube

__all__ = ["plan_free_space", "plan_periodic"]


def plan_free_space(fmm, clock, x, sigma, y, exclude_self, gradient, sigma_range, root,
                    check_root, depth, m2l_capacity, sync_free):
    """The plan of a free-space evaluation by the evaluator ``fmm`` (arguments as
    :meth:`vortexsim.fmm.evaluator.FMM.plan`; ``y`` the targets, ``x`` itself without
    them): the adaptive tree where asked or preferred, else the level-uniform tree at
    the caller's depth, the ``leaf_size`` rule or the cost model's depth, its root cube
    stretched so that the leaves are no narrower than the reach."""
    xp = fmm.device.xp
    planner = fmm.planner
    n, m = x.shape[0], y.shape[0]
    k_grad = gradient_count(gradient, m, exclude_self)
    allows_sync_free = (sigma_range is not None and root is not None and not check_root
                        and depth is not None)
    if sync_free and not allows_sync_free:
        raise ValueError("sync_free=True needs sigma_range, root and depth with "
                         "check_root=False (otherwise the plan reads them from the "
                         "device); pass them, or sync_free=None.")
    sync_free_asked = sync_free is True
    sync_free = allows_sync_free if sync_free is None else bool(sync_free)
    common = dict(n_sources=n, n_targets=m, gradient_count=k_grad,
                  returns_gradient=gradient is not False, exclude_self=exclude_self)
    if n == 0 or m == 0:
        return Plan("empty", 0, fmm.order, 0.0, None, 0.0, fmm.leaf_size, None, True,
                    False, sync_free, None, None, **common)
    # host scalars: core-radius range and root-cube edge, in one transfer on the GPU
    if root is None:
        lo, width = root_cube(x, y, xp)
    else:
        lo, width = xp.asarray(root[0], dtype=xp.float64), float(root[1])
    if sigma_range is None:
        scalars = [sigma.min(), sigma.max()] + ([width] if root is None else [])
        s_min, s_max, *rest = fmm.stages.backend.host_floats(scalars)
        width = rest[0] if rest else width
        clock.lap("sigma")
    else:
        s_min, s_max = (float(v) for v in sigma_range)
        if not 0 < s_min <= s_max:
            raise ValueError(f"sigma_range must be (min, max) with 0 < min <= max, "
                             f"got {sigma_range!r}.")
    name = fmm.kernel.name
    if name in ("algebraic", "winckelmans") and s_max > s_min * (1 + 1e-12):
        raise ValueError(
            f"method='fmm' with kernel {name!r} needs a uniform sigma (got {s_min:g} to "
            f"{s_max:g}): its far field expands the regularized kernel, which depends on "
            "sigma. The singular far field would only reach a tolerance of about "
            f"1.5/rho^2 for that kernel. Use kernel='gaussian' or method='direct'.")
    green = E.green_function(name, s_min)
    reach = near_field_reach(name, fmm.tol, s_max)
    if root is None and not isinstance(width, float):
        width = float(width)
        clock.lap("root")
    check = root is not None and check_root
    uniform_sigma = s_min == s_max

    def adaptive(adaptive_depth, adaptive_width):
        if sync_free_asked:
            raise ValueError("sync_free=True: these points take the adaptive tree, "
                             "whose build reads sizes from the device; pass "
                             "tree='uniform' to the FMM for sync-free calls.")
        return Plan("adaptive", adaptive_depth, fmm.order, reach, lo, adaptive_width,
                    fmm.leaf_size or ADAPTIVE_LEAF_SIZE[fmm.device.kind], green,
                    uniform_sigma, check, False, None, None, **common)

    if fmm.tree == "adaptive" and green.harmonic:
        adaptive_depth, width = fmm.adaptive_root(width, reach)
        if adaptive_depth >= 3:
            return adaptive(adaptive_depth, width)
    depth_max, min_leaf = planner.depth_limit(width, reach)
    occupied_leaves = None            # target leaves holding points, when counted
    if depth is not None:
        if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 0:
            raise ValueError(f"depth must be a non-negative integer, got {depth!r}.")
        depth = min(int(depth), depth_max)
    elif fmm.leaf_size is not None:
        depth = choose_depth(n, m, fmm.leaf_size, max_depth=depth_max)
    else:
        # one or two small device-to-host transfers: the near-field pair counts and
        # occupied boxes per depth
        pairs, occupied = depth_counts(x, y, lo, width, depth_max, min_leaf,
                                       fmm.near_radius, xp)
        clock.lap("depth")
        if fmm.tree == "auto":
            adaptive_depth, adaptive_width = fmm.adaptive_root(width, reach)
            if planner.prefers_adaptive(pairs, m, adaptive_depth, green):
                return adaptive(adaptive_depth, adaptive_width)
        depth = planner.cheapest_depth(pairs, green, occupied)
        occupied_leaves = float(occupied[depth, depth])
    # a root cube stretched so that the leaves are no narrower than the reach
    width = stretched_width(width, depth, min_leaf)
    step = (m2l_capacity if sync_free and m2l_capacity is not None
            and m2l_capacity[0] == depth else None)
    return Plan("uniform", depth, planner.order_at(depth), reach, lo, width,
                fmm.leaf_size, green, uniform_sigma, check, sync_free, step,
                occupied_leaves, **common)


def plan_periodic(fmm, clock, x, sigma, y, exclude_self, gradient, sigma_range, depth, box):
    """The plan of a periodic evaluation by the evaluator ``fmm``: the level-uniform tree
    whose root is the box [0, box)³, of depth ≥
    :data:`~vortexsim.fmm.periodic.PERIODIC_MIN_DEPTH` with leaves at least reach /
    near_radius wide (a ValueError where the box is too small for that), at the cost
    model's depth (as free space, counted without the wrap) or the ``leaf_size`` rule or
    the caller's ``depth``; the full order P."""
    xp = fmm.device.xp
    planner = fmm.planner
    n, m = x.shape[0], y.shape[0]
    name = fmm.kernel.name
    common = dict(n_sources=n, n_targets=m,
                  gradient_count=gradient_count(gradient, m, exclude_self),
                  returns_gradient=gradient is not False, exclude_self=exclude_self,
                  box=box)
    green = E.green_function(name, 1.0)
    if not green.harmonic:
        raise ValueError(
            f"method='fmm' in a periodic box needs a kernel whose far field is 1/r "
            f"(gaussian, polynomial or singular); kernel {name!r} expands its "
            "regularized kernel, which has no periodic lattice sum here. Use "
            "kernel='gaussian' (or method='spectral').")
    lo = xp.zeros(3)
    if n == 0 or m == 0:
        return Plan("empty", 0, fmm.order, 0.0, lo, box, fmm.leaf_size, green, True,
                    False, False, None, None, **common)
    if sigma_range is None:
        s_min, s_max = fmm.stages.backend.host_floats([sigma.min(), sigma.max()])
        clock.lap("sigma")
    else:
        s_min, s_max = (float(v) for v in sigma_range)
    reach = near_field_reach(name, fmm.tol, s_max)
    depth_max = planner.max_depth(fmm.order)
    radius = fmm.near_radius
    if reach > 0:
        # leaves of the box itself (no stretching): width box / 2^d ≥ reach / r,
        # up to PERIODIC_LEAF_SLACK
        def fits(r):
            return int(math.floor(math.log2(box * r / (PERIODIC_LEAF_SLACK * reach))
                                  + 1e-12))
        fit = fits(radius)
        if fit < PERIODIC_MIN_DEPTH and radius == 1 and fits(2) >= PERIODIC_MIN_DEPTH:
            # the 5³ stencil (its own stages, made once) where the 3³ one cannot fit
            radius, fit = 2, fits(2)
            planner = fmm.periodic_wide_stages()[1]
        if fit < PERIODIC_MIN_DEPTH:
            raise ValueError(
                f"the periodic FMM's near field reaches {reach:.4g} (sigma * rho*(tol) "
                f"= {s_max:.4g} * {reach / s_max:.3g}), more than box * r / (4 * "
                f"{PERIODIC_LEAF_SLACK}) = "
                f"{box * max(radius, 2) / 4 / PERIODIC_LEAF_SLACK:.4g} for box = "
                f"{box:g} and a near stencil of r = {max(radius, 2)} leaves: the "
                f"leaves of a tree of depth >= {PERIODIC_MIN_DEPTH} cannot be as wide "
                "as reach / r. Use method='spectral' (exact for the Gaussian at any "
                "sigma), a smaller sigma or a larger box.")
        depth_max = min(depth_max, fit)
    depth_max = max(depth_max, PERIODIC_MIN_DEPTH)
    occupied = None
    if depth is not None:
        if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 0:
            raise ValueError(f"depth must be a non-negative integer, got {depth!r}.")
        depth = int(depth)
    elif fmm.leaf_size is not None:
        depth = choose_depth(n, m, fmm.leaf_size, max_depth=depth_max)
    else:
        pairs, occ = near_pairs_by_depth(x, y, lo, box, depth_max, radius, xp)
        clock.lap("depth")
        depth = planner.cheapest_depth(pairs, green)
        occupied = float(occ[max(depth, PERIODIC_MIN_DEPTH)])
    depth = min(max(depth, PERIODIC_MIN_DEPTH), depth_max)
    return Plan("uniform", depth, fmm.order, reach, lo, box, fmm.leaf_size, green,
                s_min == s_max, False, False, None, occupied, near_radius=radius,
                **common)
