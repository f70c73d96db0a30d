r"""The plan of an FMM evaluation: order, reach, root cube, depth and tree kind.

Rules (measured; the data behind each constant is in docs/fmm-design.md, section
"Calibration data"):

* expansion order ``P`` from ``tol`` (:func:`order_for_tol`, lowered for shallow trees
  where measured, :func:`shallow_order`);
* the near field's reach (:func:`~vortexsim.fmm.near.near_field_reach`) and the stencil
  radius bound the leaf width from below, the memory budget bounds the depth from above
  (:meth:`Planner.depth_limit`);
* within that range the depth of least modelled cost (:meth:`Planner.cheapest_depth`)
  from the exact near-field pair counts of each depth (:func:`near_pairs_by_depth`);
* ``tree="auto"`` takes the adaptive tree where the level-uniform one cannot refine far
  enough (:meth:`Planner.prefers_adaptive`);
* a time stepper's sync-free calls get the sparse M2L's sizes once per step
  (:meth:`Planner.m2l_capacity` → :class:`M2LPlan`).

:class:`Plan` is the frozen result that :meth:`vortexsim.fmm.evaluator.FMM.execute` runs.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
import typing

import numpy as np

from ..kernels.morton import count_cells, morton_keys
from . import cuda
from . import expansions as E
from .near import near_field_reach

__all__ = ["Plan", "Planner", "FMMConfig", "M2LPlan", "order_for_tol", "shallow_order",
           "fmm_delivers", "near_pairs_by_depth", "stretched_width", "gradient_count",
           "target_sets", "default_separation", "default_near_radius",
           "default_memory_budget", "host_memory", "WIDE_BELOW", "WIDE_CPU_BELOW",
           "FLOAT32_TOL_MIN", "COST_RATES", "LEAF_BOX_COST", "depth_counts",
           "ADAPTIVE_LEAF_SIZE", "AUTO_TREE_FACTOR",
           "CAPACITY_SLACK", "CHUNK_BYTES"]

#: (tol, P): the expansion order of the standard separation for tol down to that row,
#: the smallest P whose measured errors meet err_u ≤ tol/2 and err_∇u ≤ 5·tol with a
#: margin for deep trees (regularized far field: algebraic, winckelmans)
ORDER_TABLE = ((1e-2, 4), (1e-3, 8), (1e-4, 10), (1e-5, 14), (1e-6, 18))
#: the same for the 1/r far field (singular, gaussian, polynomial), which converges faster
ORDER_TABLE_SINGULAR = ((1e-2, 4), (1e-3, 8), (1e-4, 10), (1e-5, 14), (1e-6, 16))
#: the wide separation (M2L only between boxes two boxes apart, 875 offsets per box,
#: 5³ near stencil) converges ~3.5× per order instead of ~1.75×: tol down to 1e-9
ORDER_TABLE_WIDE = ((1e-6, 11), (1e-7, 11), (1e-8, 13), (1e-9, 15))
#: its 1/r twin (the Gaussian errs ~4× more than the singular kernel, so it sets it)
ORDER_TABLE_WIDE_SINGULAR = ((1e-6, 10), (1e-7, 11), (1e-8, 13), (1e-9, 15))
#: tolerances below this use the wide separation by default
WIDE_BELOW = 1e-6
#: on the CPU the Gaussian and polynomial kernels use it from here down (faster there)
WIDE_CPU_BELOW = 1e-5
#: the smallest tol a float32 evaluator accepts (its near field alone errs ~6e-7)
FLOAT32_TOL_MIN = 1e-6
#: (kernel, tol of the table row, deepest tree level, order): trees no deeper than that
#: level meet the row's tol with the lower order (measured)
SHALLOW_ORDERS = (("singular", 1e-6, 4, 14),)

#: cost model of :meth:`Planner.cheapest_depth` per (device kind, precision): near-field
#: pairs per second, M2L flops per second, and the fixed cost [s] of one (target leaf,
#: stencil box) visit of the near field (H100 and the 2-core CI machine)
COST_RATES = {("gpu", "float64"): (1.1e11, 2.0e13, 1.9e-8),
              ("gpu", "float32"): (3.5e11, 1.5e13, 1.9e-8),
              ("cpu", "float64"): (2.0e7, 3.0e10, 2e-6),
              ("cpu", "float32"): (2.0e7, 3.0e10, 2e-6)}
#: the GPU's sparse far field (:meth:`Planner.cheapest_depth`): cost [s] per box of the
#: leaf level that the level-uniform tree handles whether it holds points or not (the
#: zeroed expansion arrays, the M2L's output).  H100, leapfrog at t = 20 (cube 10.45):
#: depth 5 cost ~3 ms per evaluation more than depth 4 at equal near-field pairs, for
#: 28 672 more leaf boxes, measured while the leaf level's M2M and L2L still ran over
#: every box (they now run on the occupied leaves: the constant overstates the cost,
#: which only delays the deeper tree; benchmarks/RESULTS.md)
LEAF_BOX_COST = 7e-8
#: default leaf_size of the adaptive tree (most points a leaf box may hold), per device
#: kind (the fastest measured on the clustered benchmark)
ADAPTIVE_LEAF_SIZE = {"gpu": 512, "cpu": 64}
#: tree="auto" takes the adaptive tree when the level-uniform tree at its deepest
#: admissible level still has more than this many times the near-field pairs that
#: balanced leaves would give (between the measured break-even points)
AUTO_TREE_FACTOR = 2.0
#: capacity of a sparse-M2L class: count + count / CAPACITY_SLACK + 4, at most the
#: class's boxes (points move a little between the stages of a step; a margin that
#: is too large would push the small upper levels back to the dense M2L)
CAPACITY_SLACK = 8
#: work-array budget of one batched M2L GEMM [bytes], per device kind
CHUNK_BYTES = {"gpu": 2 << 30, "cpu": 256 << 20}
#: deepest level the memory-budget rule considers
MAX_BUDGET_DEPTH = 8


def fmm_delivers(tol: float) -> bool:
    """Whether this version's FMM meets ``tol`` (down to 1e-9, with the wide separation
    below 1e-6, on the CPU and the GPU).  ``method="auto"`` takes the direct sum where
    it does not."""
    return tol >= ORDER_TABLE_WIDE[-1][0]


def check_tol(tol) -> float:
    """``tol`` as a float when it is a number in (0, 1) (the FMM's relative accuracy);
    ValueError otherwise."""
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating)) \
            or not 0 < tol < 1:
        raise ValueError(f"tol must be a number in (0, 1), got {tol!r}.")
    return float(tol)


def order_for_tol(tol: float, kernel_name: str = "algebraic", separation: int = 1) -> int:
    """Expansion order P for a relative tolerance ``tol`` and kernel: 1e-6 ≤ tol < 1 with
    the standard separation (1), 1e-9 ≤ tol < 1 with the wide one (2)."""
    tol = check_tol(tol)
    singular = kernel_name in ("singular", "gaussian", "polynomial")
    if separation == 2 and tol < WIDE_CPU_BELOW:
        table = ORDER_TABLE_WIDE_SINGULAR if singular else ORDER_TABLE_WIDE
    else:
        table = ORDER_TABLE_SINGULAR if singular else ORDER_TABLE
    for t, p in table:
        if tol >= t:
            return p
    raise ValueError(f"tol = {tol:g} is below what this version's FMM delivers "
                     f"({table[-1][0]:g}); use method='direct' (exact to round-off).")


def shallow_order(tol: float, kernel_name: str, depth: int, order: int) -> int:
    """The expansion order for a tree of ``depth`` levels: ``order`` (from
    :func:`order_for_tol`), or the lower one of :data:`SHALLOW_ORDERS` where measured."""
    for name, row_tol, max_depth, p in SHALLOW_ORDERS:
        if (kernel_name == name and depth <= max_depth and row_tol <= tol
                and order_for_tol(tol, kernel_name) == order_for_tol(row_tol, kernel_name)):
            return min(order, p)
    return order


def default_separation(device, kernel_name, tol, near_radius, leaf_size):
    """The M2L separation when the caller gives none: 2 below tol 1e-6 (only the wide
    separation delivers there); on the CPU also from 1e-5 down for the kernels with a
    near-field reach (5³ stencil there anyway; faster, at a lower order) unless the
    caller pins near_radius or leaf_size (e.g. to compare with the GPU); else 1."""
    cpu_wide = (not device.is_gpu and tol < WIDE_CPU_BELOW
                and kernel_name in ("gaussian", "polynomial")
                and near_radius is None and leaf_size is None)
    return 2 if tol < WIDE_BELOW or cpu_wide else 1


def default_near_radius(device, kernel_name, separation):
    """The leaves' stencil half-width when the caller gives none: the wide separation's
    2; 2 on the CPU for kernels with a near-field reach (leaves of half the reach,
    fewer pairs); else 1 (the GPU runs faster with 1)."""
    return 2 if (separation == 2 or (
        not device.is_gpu and kernel_name in ("gaussian", "polynomial"))) else 1


def default_memory_budget(backend):
    """A quarter of the device's (GPU) or host's (CPU) memory [bytes]; ``backend``: the
    evaluator's (:mod:`vortexsim.fmm.stages`)."""
    return 0.25 * backend.total_memory()


def host_memory():
    """The host's RAM [bytes] (16 GiB, for a 4 GiB budget, where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16.0 * 2**30


def stretched_width(width, depth, min_leaf):
    """Root-cube edge [L]: ``width``, stretched where needed so that the leaves of a
    tree of ``depth`` levels are no narrower than ``min_leaf`` (the near field's
    reach over its stencil radius)."""
    return max(width, (1 << depth) * min_leaf * (1 + 1e-9))


def gradient_count(gradient, m, exclude_self):
    """Number of leading targets that get ∇u (``evaluate``'s ``gradient`` argument)."""
    if isinstance(gradient, (bool, np.bool_)):
        return m if gradient else 0
    if isinstance(gradient, (int, np.integer)) and 0 <= gradient <= m:
        if exclude_self and gradient not in (0, m):
            raise ValueError(f"gradient={gradient} asks for ∇u at part of the targets; "
                             "pass the targets explicitly, or gradient=True / False.")
        return int(gradient)
    raise ValueError(f"gradient must be True, False or an integer in [0, {m}] (∇u at the "
                     f"first k targets), got {gradient!r}.")


def target_sets(targets, gradient):
    """The target sets of an evaluation with ``gradient`` (bool, or k: ∇u at the first k
    targets): a list of (index of the first target, points, with ∇u), one set per kind,
    so that each kernel launch is uniform (used by :meth:`FMM.evaluate` and by
    :class:`vortexsim.summation.direct.DirectSum`, whose direct sum and step plan split the same way)."""
    m = targets.shape[0]
    k = gradient_count(gradient, m, False)
    if k in (0, m):                       # one set (gradient=True keeps ∇u even if M = 0)
        as_bool = isinstance(gradient, (bool, np.bool_)) and bool(gradient)
        return [(0, targets, as_bool or k > 0)]
    return [(0, targets[:k], True), (k, targets[k:], False)]


def near_pairs_by_depth(x, y, lo, width, depth_max, radius, xp):
    """Near-field pair counts and occupied target leaves, each (depth_max + 1,) float64
    on the host, of level-uniform trees of depth 0..depth_max.

    Sources x (N, 3) and targets y (M, 3) [L] are histogrammed on the 2^depth_max grid of
    the cube (lo, width); coarser grids sum 2×2×2 blocks.  At each depth the count is
    Σ_leaf targets(leaf) × sources in its (2r+1)³ stencil (a box filter of the source
    grid).  Memory O(N + M + 8^depth_max); one host transfer for the result (on the GPU
    one counting kernel per depth, :func:`vortexsim.fmm.cuda.stencil_pair_counts`).
    """
    same = y is x
    cs = count_cells(x, lo, width, depth_max, xp)
    ct = cs if same else count_cells(y, lo, width, depth_max, xp)
    if xp is not np:
        return cuda.stencil_pair_counts(cs, ct, same, depth_max, radius)
    cs = cs.astype(np.float64)
    ct = cs if same else ct.astype(np.float64)
    counts, occupied = [], []
    width_stencil = 2 * radius + 1
    for depth in range(depth_max, -1, -1):
        side = cs.shape[0]
        box = np.pad(cs, radius)
        for axis in range(3):                                     # separable box sum
            sl = [slice(None)] * 3
            acc = None
            for k in range(width_stencil):
                sl[axis] = slice(k, k + side)
                acc = box[tuple(sl)] if acc is None else acc + box[tuple(sl)]
            box = acc
        counts.append((ct * box).sum())
        occupied.append((ct > 0).sum())
        if depth:
            h = side // 2
            cs = cs.reshape(h, 2, h, 2, h, 2).sum(axis=(1, 3, 5))
            ct = cs if same else ct.reshape(h, 2, h, 2, h, 2).sum(axis=(1, 3, 5))
    out = np.stack([np.stack(counts[::-1]), np.stack(occupied[::-1]).astype(np.float64)])
    return out[0], out[1]


def depth_counts(x, y, lo, width, depth_max, min_leaf, radius, xp):
    """The cost model's inputs for trees of depth 0..depth_max, each on its own root cube:
    ``stretched_width(width, L, min_leaf)`` (wider than ``width`` only where the leaves
    would be narrower than ``min_leaf``, i.e. at most at depth_max).

    Returns (pairs, occupied): pairs (depth_max + 1,) the near-field pair counts and
    occupied (depth_max + 1, depth_max + 1) the boxes holding targets at each level of
    each tree (row L, levels 0..L), host float64.  One or two
    :func:`near_pairs_by_depth` calls (one transfer each): counting every depth on the
    deepest tree's stretched cube would give the shallower trees leaves up to twice too
    wide, eight times the pairs.
    """
    width_max = stretched_width(width, depth_max, min_leaf)
    pairs, occ = near_pairs_by_depth(x, y, lo, width_max, depth_max, radius, xp)
    rows = np.tile(occ, (depth_max + 1, 1))
    if depth_max > 0:
        narrow = stretched_width(width, depth_max - 1, min_leaf)
        if narrow < width_max:
            shallow, occ_shallow = near_pairs_by_depth(x, y, lo, narrow, depth_max - 1,
                                                       radius, xp)
            pairs = np.concatenate([shallow, pairs[-1:]])
            rows[:-1, :-1] = occ_shallow
    return pairs, rows


@dataclasses.dataclass(frozen=True, slots=True)
class FMMConfig:
    """Parameters of one FMM evaluation (derived from kernel, tol and the inputs)."""

    order: int
    depth: int
    near_radius: int
    reach: float
    leaf_size: int | None
    tree: str = "uniform"            # the tree this evaluation used


class M2LPlan(typing.NamedTuple):
    """A time step's sizes for its sync-free GPU calls (:meth:`Planner.m2l_capacity`).

    depth: the tree's leaf level; capacity, counts: host int64 (depth − 1, 8), GEMM rows
    and non-empty source boxes per level 2..depth and parity class; occupied: leaves
    holding points, per target set; order: the expansion order the layouts are for;
    layouts: level → None (dense M2L) or (host layout, its device tables), the tables
    copied to the device once, at the step's start (a copy made inside an evaluation
    from pageable memory would wait for the stream to drain).
    """
    depth: int
    capacity: np.ndarray
    occupied: tuple
    counts: np.ndarray
    order: int = -1
    layouts: dict | None = None


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class Plan:
    """What one evaluation will do, fixed before any stage runs (:meth:`FMM.plan`).

    tree: "uniform" (level-uniform octree), "adaptive" (:mod:`vortexsim.fmm.adaptive`)
    or "empty" (no sources or no targets: zeros); depth: the leaf level (the deepest
    level of the adaptive tree); order: the expansion order P; reach [L]: the near
    field's; lo (3,) [L] (on the evaluator's device) and width [L]: the root cube, already
    stretched so that leaves are no narrower than reach / near_radius; leaf_size: the
    adaptive tree's, or the caller's rule; green: the far field's Green's function;
    uniform_sigma: every core radius is the same; check_root: verify that the cube holds
    every point while building the tree (a caller's root); sync_free: the evaluation
    makes no device-to-host transfer (the dense M2L, or the sparse one sized by ``m2l``);
    m2l: the step plan (:class:`M2LPlan`, or the sizes tuple) when it applies to this
    depth; occupied_leaves: target leaves holding points, when counted; n_sources,
    n_targets: the sizes the plan was made for; gradient_count: targets getting ∇u;
    returns_gradient: ∇u is returned (an array, possibly (0, 3, 3)) rather than None;
    exclude_self: the targets are the sources; box: the edge [L] of the periodic box
    [0, L)³ that is the root cube (:mod:`vortexsim.fmm.periodic`), or None (free space);
    near_radius: the leaves' stencil half-width when it is not the evaluator's (a
    periodic box too small for its 3³ stencil), else None.
    """

    tree: str
    depth: int
    order: int
    reach: float
    lo: object
    width: float
    leaf_size: int | None
    green: object
    uniform_sigma: bool
    check_root: bool
    sync_free: bool
    m2l: object
    occupied_leaves: float | None
    n_sources: int
    n_targets: int
    gradient_count: int
    returns_gradient: bool
    exclude_self: bool
    box: float | None = None
    near_radius: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Planner:
    """The evaluator's fixed parameters and the rules that turn them and the inputs into
    a depth: kernel_name, tol, order (the tol rule's or the caller's; ``order_given``),
    separation, near_radius, leaf_size, memory_budget [bytes], device_kind ("cpu" or
    "gpu"), precision ("float64" or "float32")."""

    kernel_name: str
    tol: float
    order: int
    order_given: bool
    separation: int
    near_radius: int
    leaf_size: int | None
    memory_budget: float
    device_kind: str
    precision: str

    @property
    def list_length(self):
        """M2L box pairs per target box of a full level (the cost model's list length)."""
        return 189 if self.separation == 1 else 875

    def order_at(self, depth):
        """Expansion order of a tree of ``depth`` levels: the given order, else the
        tol rule's lowered where measured (:func:`shallow_order`)."""
        if self.order_given:
            return self.order
        return shallow_order(self.tol, self.kernel_name, depth, self.order)

    def max_depth(self, order):
        """Deepest leaf level whose expansion arrays fit ``memory_budget`` bytes.

        Multipoles and locals of the leaf level, their compressed copies and one level
        above take about 6 × 8^L × n(P) × 3 × 8 bytes; beyond that budget leaves get
        fuller instead (more near-field work, same accuracy).
        """
        per_box = 6 * E.multi_indices(order).n * 3 * 8
        depth = 0
        while depth < MAX_BUDGET_DEPTH and 8 ** (depth + 1) * per_box <= self.memory_budget:
            depth += 1
        return depth

    def depth_limit(self, width, reach, depth_max=None):
        """Deepest admissible leaf level for a root cube of edge ``width`` [L] (at most
        ``depth_max``, by default the memory budget's; leaves no narrower than
        reach / near_radius), and that narrowest leaf [L]."""
        if depth_max is None:
            depth_max = self.max_depth(self.order)
        min_leaf = reach / self.near_radius
        if reach > 0:
            # the deepest level whose leaves still reach `reach` with the stencil
            depth_max = min(depth_max, max(0, math.ceil(math.log2(width / min_leaf))))
        return depth_max, min_leaf

    def cheapest_depth(self, pairs, green, occupied=None):
        """Leaf level with the least modelled cost, given the near-field pair counts.

        ``pairs[L]`` (L = 0..depth_max) is the number of near-field pairs of a tree of
        depth L for the actual points; ``occupied``, optional, (depth_max + 1, depth_max
        + 1): row L the boxes holding targets at each level 0..L of that tree (both from
        :func:`depth_counts`).  The cost is the near field, pairs[L] at the device's pair
        rate plus one fixed cost per (target leaf, stencil box) visit, plus the far field:

        * the GPU's sparse M2L (``occupied`` given, 1/r far field, standard separation):
          Σ_{l=2..L} occupied[L, l] × 189 M2L box pairs × 6 c² flops at its GEMM rate,
          plus :data:`LEAF_BOX_COST` per box of the leaf level, occupied or not (the
          near field visits only the occupied[L, L] leaves with targets).  A cloud that
          stretches the root cube (rings that travel, tracers left behind) leaves most
          deep boxes empty, so a deeper tree pays there;
        * otherwise the level-uniform tree translates every box: Σ_{l=2..L} 8^l × 189
          (875 with the wide separation) × 6 c² flops, and visits all 8^L leaves;

        with c = (P+1)² for the compressed 1/r far field and c = n(P) for the regularized
        one.  P2M and L2P cost the same at every depth and are left out.  Ties go to the
        deeper tree.
        """
        near_rate, gemm_rate, visit = COST_RATES[(self.device_kind, self.precision)]
        stencil = (2 * self.near_radius + 1) ** 3
        c = (self.order + 1) ** 2 if green.harmonic else E.multi_indices(self.order).n
        per_box = self.list_length * 6 * c * c / gemm_rate
        sparse = (occupied is not None and self.device_kind == "gpu"
                  and self.separation == 1 and green.harmonic)
        best, best_cost = 0, math.inf
        for depth, npairs in enumerate(pairs):
            if sparse:
                occ = occupied[depth]
                far = float(sum(occ[2:depth + 1])) * per_box + (
                    8.0 ** depth * LEAF_BOX_COST if depth >= 2 else 0.0)
                visits = float(occ[depth]) * stencil * visit
            else:
                far = sum(8.0 ** level for level in range(2, depth + 1)) * per_box
                visits = 8.0 ** depth * stencil * visit
            cost = float(npairs) / near_rate + visits + far
            if cost <= best_cost:
                best, best_cost = depth, cost
        return best

    def adaptive_root(self, width, reach, max_depth):
        """(depth, root-cube edge [L]) of the adaptive tree for a bounding cube of edge
        ``width``: the deepest level (at most ``max_depth``) whose leaves, with the cube
        stretched a little (as the uniform tree's), are as wide as the near field's
        reach / ρ."""
        depth, min_leaf = self.depth_limit(width, reach, max_depth)
        return depth, stretched_width(width, depth, min_leaf)

    def prefers_adaptive(self, pairs, m, adaptive_depth, green):
        """Whether ``tree="auto"`` takes the adaptive tree for these points.

        ``pairs`` (depth_max + 1,): the level-uniform trees' near-field pair counts
        (:func:`near_pairs_by_depth`); ``adaptive_depth``: :meth:`adaptive_root`'s.  The
        adaptive tree pays only where the uniform one cannot refine far enough: its
        deepest level (``depth_max``: the memory budget's) lies above the adaptive
        tree's (where leaves are the reach wide), and even there a target meets more
        than :data:`AUTO_TREE_FACTOR` × stencil × leaf_size / 2 sources, the most that
        balanced adaptive leaves (≤ leaf_size sources + targets each) put in a stencil.
        Needs the 1/r far field and near_radius = separation (the adaptive tree's).
        """
        if not green.harmonic or self.near_radius != self.separation or m == 0:
            return False
        depth_max = len(pairs) - 1
        if depth_max >= adaptive_depth or adaptive_depth < 3:
            return False
        leaf = ADAPTIVE_LEAF_SIZE[self.device_kind]
        stencil = (2 * self.near_radius + 1) ** 3
        return float(pairs[depth_max]) > AUTO_TREE_FACTOR * m * stencil * leaf / 2

    def m2l_capacity(self, m2l, x, sigma_range, root, depth, targets=()):
        """Sizes of the sparse M2L for sync-free calls at these sources (one transfer).

        m2l: the evaluator's M2L stage (:class:`vortexsim.fmm.m2l.M2L`); x (N, 3) [L]: the
        sources; sigma_range, root, depth: as :meth:`FMM.evaluate` will get them;
        targets: the target sets of those calls (the targets, or with an integer
        ``gradient=k`` the first k and the rest), whose occupied leaves size the near
        field's thread blocks.  Returns an :class:`M2LPlan` ``(depth, capacity, occupied,
        counts, order, layouts)`` with the leaf level the tree will have, host int64
        arrays (depth − 1, 8) of the non-empty source boxes per level 2..depth and
        parity class (``counts``) and of those plus a margin (:data:`CAPACITY_SLACK`,
        ``capacity``), and the number of leaves holding points of each target set; or
        None where no sparse M2L can run (CPU, regularized far field, wide separation,
        depth < 2).  A time stepper calls it once per step at the step's start
        positions, so the result is a function of the state alone (restarts stay
        bitwise).
        """
        xp = m2l.device.xp
        s_min, s_max = (float(v) for v in sigma_range)
        if (not m2l.sparse_capable or self.separation != 1
                or not E.green_function(self.kernel_name, s_min).harmonic):
            return None
        lo, width = xp.asarray(root[0], dtype=xp.float64), float(root[1])
        reach = near_field_reach(self.kernel_name, self.tol, s_max)
        depth_max, min_leaf = self.depth_limit(width, reach)
        depth = min(int(depth), depth_max)
        if depth < 2 or x.shape[0] == 0:
            return None
        width = stretched_width(width, depth, min_leaf)             # as evaluate

        def occupancy(pts):                # 1 for each leaf holding a point of pts
            hit = xp.zeros(8 ** depth, dtype=xp.int64)
            if pts.shape[0]:
                hit[morton_keys(xp.asarray(pts, dtype=xp.float64), lo, width, depth,
                                xp).astype(xp.int64)] = 1
            return hit

        occupied = occupancy(x)
        hits = [occupancy(pts) for pts in targets]
        leaves = [xp.broadcast_to(h.sum(), (8,)) for h in hits]
        # the sparse M2L by offset: its pairs per offset and level (sources in one box,
        # targets in the other), sized like the classes' rows
        pair_levels = m2l.pair_levels(range(2, depth + 1)) if targets else []
        taken = functools.reduce(xp.maximum, hits) if pair_levels else None
        counts, pair_counts = [], {}
        for level in range(depth, 1, -1):
            if level in pair_levels:
                pair_counts[level] = m2l.pair_counts(occupied, taken, level,
                                                     m2l.separation_at(level, depth))
            counts.append(occupied.reshape(-1, 8).sum(axis=0))
            occupied = occupied.reshape(-1, 8).max(axis=1)
            if taken is not None:
                taken = taken.reshape(-1, 8).max(axis=1)
        out = xp.concatenate([xp.stack(counts[::-1] + leaves).ravel()]
                             + list(pair_counts.values())).get()   # one transfer
        n_rows = depth - 1 + len(leaves)
        head, rest = out[:8 * n_rows].reshape(n_rows, 8), out[8 * n_rows:]
        counts, leaves = head[:depth - 1], tuple(int(v[0]) for v in head[depth - 1:])
        pair_caps = m2l.pair_caps_of(list(pair_counts), rest, depth, CAPACITY_SLACK)
        boxes = (8 ** np.arange(2, depth + 1) // 8)[:, None]       # boxes per class
        cap = np.minimum(counts + counts // CAPACITY_SLACK + 4, boxes)
        # the sparse levels' layouts and small device tables, in one copy now (the
        # stream is idle after the transfer) instead of four per level and evaluation
        P = self.order_at(depth)
        levels = range(2, depth + 1)
        layouts = [m2l.sparse_layout(depth, level, P, cap[row], int(counts[row].sum()),
                                     pair_caps.get(level))
                   for row, level in enumerate(levels)]
        host = [a.ravel() for lay in layouts if lay is not None for a in lay["tables"]]
        flat = xp.asarray(np.concatenate(host)) if host else None
        prepared, at = {}, 0
        for level, lay in zip(levels, layouts):
            if lay is None:
                prepared[level] = None
                continue
            tables = []
            for a in lay["tables"]:
                tables.append(flat[at:at + a.size].reshape(a.shape))
                at += a.size
            prepared[level] = (lay, tuple(tables))
        return M2LPlan(depth, cap, leaves, counts, P, prepared)
