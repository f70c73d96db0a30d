r"""Fast multipole evaluation of u and ∇u (design and parameter rules: docs/fmm-design.md).

Algorithm (level-uniform octree, Cartesian Taylor expansions of the vector
potential, :mod:`vortexsim.fmm.expansions`):

1. tree     sources and targets sorted into 8^L leaves (Morton order)
2. upward   P2M at the leaves, M2M up to level 2
3. M2L      per level, box pairs whose parents are neighbours but which are not
            within the near-field stencil (radius r at the leaf level, 1 above)
4. downward L2L down to the leaves, L2P at the targets (u = ∇×ψ, ∇u = ∇∇×ψ)
5. near     direct pair sums with the regularized kernel over the (2r+1)³ leaf stencil

Accuracy rules (``tol`` is the relative L2 error of u against the regularized
direct sum; ∇u is held to 10·tol):

* expansion order ``P`` from :func:`order_for_tol` (measured table, see docs);
* the near field reaches every pair closer than ``reach``: ρ*(tol)·σ_max for
  ``gaussian`` (where 1 − q and 1 − f/3 < tol/10), σ_max for ``polynomial``,
  0 for ``singular``, ``algebraic`` and ``winckelmans`` (their far field expands
  the regularized kernel itself, which needs a uniform σ).  Leaves are at least
  reach / r wide.

For the 1/r far field (every kernel but algebraic and winckelmans) the expansions
above level-independent normalization are kept compressed between P2M and L2P:
M2M, M2L and L2L act on the (P+1)² harmonic components only (exact; docs/fmm-design.md).

Both backends run the same algorithm: NumPy on the CPU; on the GPU CuPy array
code (tree, M2M, M2L and L2L as GEMMs) plus CUDA kernels for the near field,
P2M and L2P (``kernels/cuda/fmm.cu``), all deterministic.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import math
import os
import time
import typing

import numpy as np

from ..kernels.cutoff import get_kernel
from ..kernels.direct import INV_4PI, _accumulate_block, skew
from ..kernels.morton import grid_cells, morton_keys
from . import expansions as E
from .adaptive import ADAPTIVE_MAX_DEPTH, adaptive_fmm
from .tree import (_check_cube, build_tree, choose_depth, morton_decode, neighbor_table, root_cube,
                   with_targets)

logger = logging.getLogger(__name__)

__all__ = ["FMM", "FMMConfig", "order_for_tol", "near_field_reach"]

#: expansion order P for a tolerance: the smallest P whose measured errors on
#: uniform inputs (σ = h, N = 4000, benchmarks/calibrate_fmm.py, worst of singular,
#: algebraic, winckelmans) are err_u ≤ tol/2 and err_∇u ≤ 5·tol; see docs/fmm-design.md.
#: Deeper trees (2^20 points, depth 4–5 on the GPU) err ~5× more than depth 2 at the
#: same P (P = 14 gave 1.5e-6 for the Gaussian, P = 16 1.2e-6 for the algebraic kernel
#: at 2^20), so both tables carry that extra margin.
#: Below 1e-6 the full Cartesian M2L (O(P⁶)) is too costly: those tolerances wait for
#: the next far-field operator.  The singular far field (singular, gaussian, polynomial)
#: converges faster than the regularized one (algebraic, winckelmans).
_ORDER_TABLE = ((1e-2, 4), (1e-3, 8), (1e-4, 10), (1e-5, 14), (1e-6, 18))
_ORDER_TABLE_SINGULAR = ((1e-2, 4), (1e-3, 8), (1e-4, 10), (1e-5, 14), (1e-6, 16))
#: The wide separation (M2L only between boxes two boxes apart at every level, 875
#: offsets per box instead of 189; leaves with the 5³ near stencil) converges ~3.5× per
#: order instead of ~1.75×: tolerances below 1e-6, CPU and GPU.  Measured at 2×10^4 uniform
#: points, σ = h, 400 sampled targets (benchmarks/calibrate_wide.py; err u / err ∇u;
#: depth 3 unless said):
#: singular P = 10: 2.4e-8 / 3.8e-9, 12: 1.9e-9 / 3.4e-10 (depth 4: 2.8e-9 / 1.0e-9),
#: 14: 1.5e-10 / 3.2e-11; gaussian 12: 9.5e-9 / 6.8e-8, 14: 7.8e-10 / 6.4e-9,
#: 15: 2.4e-10 / 2.1e-9, 16: 6.8e-11 / 6.6e-10; algebraic (depth 2) 12: 7.0e-9 / 1.9e-8,
#: 14: 4.8e-10 / 1.5e-9, winckelmans (depth 2) 12: 5.3e-9 / 1.1e-8, 14: 3.6e-10 / 8.6e-10.
#: The Gaussian errs ~4× more than the singular kernel at the same order, so the
#: singular family's table follows the Gaussian.  Below tol 1e-6 only; with
#: ``separation=2`` forced at a larger tol the standard table's (higher) order is used.
#: At tol 1e-6 (10^5 points, depth 4): gaussian P = 10 2.2e-7 / 1.3e-6, polynomial
#: 1.0e-7 / 3.2e-7, singular 3.2e-8 / 8.3e-9 (P = 9: gaussian 6.8e-7 / 4.1e-6).
#: At 2^20 points on the H100 (benchmarks/order_check.py --separation 2, σ = h, 200
#: sampled targets, depth 4 unless said; session 6) the trees are deeper and err more:
#: tol 1e-9: gaussian P = 14 1.15e-9 / 7.3e-9 (above tol), 15 4.9e-10 / 2.8e-9 (depth 5
#: 3.1e-10, σ = 2h 2.9e-10, 2^22 points depth 5 3.3e-10), 16 1.4e-10; algebraic 14
#: 1.09e-9 (above tol), 15 4.5e-10 / 1.9e-9, 16 1.3e-10; winckelmans 15 3.7e-10 /
#: 1.1e-9; polynomial 15 3.1e-10; singular 13 1.1e-10, 15 1.1e-11.  tol 1e-8: gaussian
#: 13 4.6e-9 (depth 5 5.1e-9), algebraic 13 4.4e-9.  tol 1e-7: gaussian 11 (depth 5)
#: 5.9e-8, algebraic 11 3.3e-8.  Hence P = 15 at 1e-9 for every kernel.
_ORDER_TABLE_WIDE = ((1e-6, 11), (1e-7, 11), (1e-8, 13), (1e-9, 15))
_ORDER_TABLE_WIDE_SINGULAR = ((1e-6, 10), (1e-7, 11), (1e-8, 13), (1e-9, 15))
#: tolerances below this use the wide separation by default
WIDE_BELOW = 1e-6
#: on the CPU, the Gaussian and polynomial kernels use it from here down: 2 cores,
#: tol 1e-6, against the standard separation (P = 16) in the same process: Gaussian
#: 10^5 points 33.7 → 27.4 s (err u 7.0e-7 → 2.2e-7), 2×10^4 points 12.5 → 5.9 s;
#: polynomial 10^5 27.5 → 23.0 s.  (The singular kernel, 3³ stencil, stays: 16.0 s
#: against 24.8 s.)
WIDE_CPU_BELOW = 1e-5
#: the smallest tol a float32 evaluator accepts (its near field alone errs ~6e-7)
FLOAT32_TOL_MIN = 1e-6


def fmm_delivers(tol: float) -> bool:
    """Whether this version's FMM meets ``tol`` (down to 1e-9, with the wide separation
    below 1e-6, on the CPU and the GPU).  ``method="auto"`` takes the direct sum where
    it does not."""
    return tol >= _ORDER_TABLE_WIDE[-1][0]


def order_for_tol(tol: float, kernel_name: str = "algebraic", separation: int = 1) -> int:
    """Expansion order P for a relative tolerance ``tol`` and kernel: 1e-6 ≤ tol < 1 with
    the standard separation (1), 1e-9 ≤ tol < 1 with the wide one (2)."""
    if not 0 < tol < 1:
        raise ValueError(f"tol must be in (0, 1), got {tol!r}.")
    singular = kernel_name in ("singular", "gaussian", "polynomial")
    if separation == 2 and tol < WIDE_CPU_BELOW:
        table = _ORDER_TABLE_WIDE_SINGULAR if singular else _ORDER_TABLE_WIDE
    else:
        table = _ORDER_TABLE_SINGULAR if singular else _ORDER_TABLE
    for t, p in table:
        if tol >= t:
            return p
    raise ValueError(f"tol = {tol:g} is below what this version's FMM delivers "
                     f"({table[-1][0]:g}); use method='direct' (exact to round-off).")


#: (kernel, tol of the table row, deepest tree level, order): trees no deeper than that
#: level meet the row's tol with the lower order.  Measured (benchmarks/order_check.py
#: on the H100, benchmarks/bench_cpu_vs_fmm3d.py on the CPU, uniform σ = h, 200
#: sampled targets, 2026-11-22): singular P = 14 gives err u 1.9e-7 at depth 3
#: (2×10^5 points), 7.5e-8 and 1.6e-7 at depth 4 (2^20 and 10^5 points), but 6.9e-7 at
#: depth 5 (2^22 points), above tol/2.  The Gaussian errs more at the same order
#: (3.7e-7 at P = 16, depth 4), so it keeps the table's order.
_SHALLOW_ORDERS = (("singular", 1e-6, 4, 14),)


def shallow_order(tol: float, kernel_name: str, depth: int, order: int) -> int:
    """The expansion order for a tree of ``depth`` levels: ``order`` (from
    :func:`order_for_tol`), or the lower one of ``_SHALLOW_ORDERS`` where measured."""
    for name, row_tol, max_depth, p in _SHALLOW_ORDERS:
        if (kernel_name == name and depth <= max_depth and row_tol <= tol
                and order_for_tol(tol, kernel_name) == order_for_tol(row_tol, kernel_name)):
            return min(order, p)
    return order


@functools.lru_cache(maxsize=64)
def _gaussian_rho_star(tol: float) -> float:
    """Smallest ρ beyond which 1 − q < tol/10 and 1 − f/3 < tol/10 (Gaussian)."""
    k = get_kernel("gaussian")
    rho = np.linspace(0.5, 12.0, 23001)
    bad = (1.0 - k.q(rho, np) >= tol / 10) | (1.0 - k.f(rho, np) / 3.0 >= tol / 10)
    return float(rho[np.nonzero(bad)[0][-1] + 1])


def near_field_reach(kernel_name: str, tol: float, sigma_max: float) -> float:
    """Distance [L] below which pairs must be summed directly (see module docstring)."""
    if kernel_name == "gaussian":
        return _gaussian_rho_star(tol) * sigma_max
    if kernel_name == "polynomial":
        return sigma_max
    return 0.0


class M2LPlan(typing.NamedTuple):
    """A time step's sizes for its sync-free GPU calls (:meth:`FMM.m2l_capacity`).

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


@dataclasses.dataclass(frozen=True, slots=True)
class FMMConfig:
    """Parameters of one FMM evaluation (derived from kernel, tol and the inputs)."""

    order: int
    depth: int
    near_radius: int
    reach: float
    leaf_size: int | None
    tree: str = "uniform"            # the tree this evaluation used


class FMM:
    """Reusable fast multipole evaluator (CPU through NumPy, GPU through CuPy + CUDA).

    Parameters
    ----------
    kernel : str, cutoff kernel (``physics.md``)
    tol : float, relative L2 accuracy of u against the regularized direct sum (∇u: 10·tol)
    precision : {"float64", "float32"}; the near field runs in this precision, the
        expansions always in float64 (their coefficients span too many decades for float32)
    device : {"auto", "cpu", "gpu"} or :class:`vortexsim.Device`, chosen once
    leaf_size : int, optional, target mean number of points per leaf (larger leaves where
        the near field must reach further); default: the depth of least modelled cost
        (:meth:`_cheapest_depth`)
    near_radius : {1, 2}, optional, leaf-level near-field stencil half-width in boxes.
        Default: 2 on the CPU for kernels whose near field has a reach (gaussian,
        polynomial: leaves of half the reach, ~0.6× the near pairs; 1.5× faster at
        10^4–10^5 points on 2 cores), else 1 (the GPU measured slower with 2, and the
        singular kernel gains nothing)
    order : int, optional, expansion order P overriding the rule of :func:`order_for_tol`
    memory_budget : float, optional, bytes the expansion arrays may take (default: a
        quarter of the GPU's memory, or of the host's RAM on the CPU); caps the depth
    separation : {1, 2}, optional, boxes between a box and those it translates from
        (M2L), at every level.  Default: 1 for tol ≥ 1e-6 (the standard FMM, 189
        offsets per box), 2 below (875 offsets, 5³ near stencil; the expansions
        converge ~3.5× per order instead of ~1.75×, which reaches tol 1e-9; the GPU
        then uses the dense M2L and caches ~3.7 GB of translation cores at P = 15)
    tree : {"auto", "uniform", "adaptive"}, default "auto".  "uniform": one leaf level
        for all points.  "adaptive" (:mod:`vortexsim.fmm.adaptive`): leaves where boxes
        hold at most ``leaf_size`` points (default :attr:`ADAPTIVE_LEAF_SIZE`), for
        clustered inputs (2^20-point Plummer cloud on the H100: 108 ms against 781 ms);
        its near stencil is the separation (``near_radius`` must then be left unset).
        "auto": the adaptive tree when the uniform one, at the deepest level it may
        take, would still leave far more near-field pairs than balanced leaves
        (:meth:`_prefers_adaptive`; decided per call, only when the depth is left to
        the cost model), else the uniform tree; ``config.tree`` says which ran.
        Kernels with a regularized far field (algebraic, winckelmans) always use the
        uniform tree, and so do configurations whose near_radius differs from the
        separation (the CPU's default 5³ stencil for the Gaussian and polynomial
        kernels at tol ≥ 1e-5).  With ``gradient=k`` the adaptive tree computes ∇u at
        every target (the uniform one splits the target sets).

    ``evaluate(x, alpha, sigma, targets=None, gradient=True) -> (u, grad_u)`` takes
    arrays on the evaluator's device; ``timings`` holds the seconds of each stage of
    the last call (GPU stages are synchronized only when ``profile=True``), ``config``
    the derived parameters.  Operators and index tables that do not depend on
    positions are cached on the instance.
    """

    def __init__(self, kernel="gaussian", tol=1e-6, precision="float64", device="auto",
                 leaf_size=None, near_radius=None, order=None, profile=False,
                 memory_budget=None, separation=None, tree="auto"):
        from ..backend import resolve_device  # noqa: PLC0415
        self.kernel = get_kernel(kernel)
        if not 0 < tol < 1:
            raise ValueError(f"tol must be in (0, 1), got {tol!r}.")
        self.device = resolve_device(device)
        if separation is None:
            # below 1e-6 only the wide separation delivers; on the CPU the kernels with
            # a near-field reach (5³ stencil there anyway) are also faster with it from
            # 1e-5 down, at a lower order (the caller's own near_radius or leaf_size
            # keep the standard FMM, e.g. to compare with the GPU)
            cpu_wide = (not self.device.is_gpu and tol < WIDE_CPU_BELOW
                        and self.kernel.name in ("gaussian", "polynomial")
                        and near_radius is None and leaf_size is None)
            separation = 2 if tol < WIDE_BELOW or cpu_wide else 1
        if separation not in (1, 2):
            raise ValueError(f"separation must be 1 or 2, got {separation!r}.")
        #: boxes between a box and those it translates from, at every level (1: the
        #: standard FMM; 2: the wide separation of tol < 1e-6, whose expansions converge
        #: ~3× per order instead of ~1.75×)
        self.separation = int(separation)
        self.order = (order_for_tol(tol, self.kernel.name, self.separation) if order is None
                      else int(order))
        self._order_given = order is not None
        self.tol = float(tol)
        if precision not in ("float64", "float32"):
            raise ValueError(f"precision must be 'float64' or 'float32', got {precision!r}.")
        if precision == "float32" and tol < FLOAT32_TOL_MIN:
            raise ValueError(
                f"tol = {tol:g} with precision='float32': float32 pair sums err by ~6e-7 "
                f"relative on their own (the direct sum too), so the FMM cannot promise "
                f"less than {FLOAT32_TOL_MIN:g} there. Use precision='float64'.")
        self.dtype = np.dtype(precision)
        if tree not in ("uniform", "adaptive", "auto"):
            raise ValueError(f"tree must be 'uniform', 'adaptive' or 'auto', got {tree!r}.")
        #: "uniform": one leaf level; "adaptive": leaves where boxes hold ≤ leaf_size
        #: points (:mod:`vortexsim.fmm.adaptive`; 1/r far field, else uniform);
        #: "auto": per call, the adaptive tree where the level-uniform one would leave
        #: far too many near-field pairs (:meth:`_prefers_adaptive`), else uniform
        self.tree = tree
        if tree == "adaptive":
            if near_radius not in (None, self.separation):
                raise ValueError(
                    f"near_radius = {near_radius} with tree='adaptive': its leaves' near "
                    f"stencil is the separation ({self.separation}); leave near_radius "
                    "unset.")
            near_radius = self.separation
        if near_radius is None:
            near_radius = 2 if (self.separation == 2 or (
                not self.device.is_gpu and self.kernel.name in ("gaussian", "polynomial"))) \
                else 1
        if near_radius not in (1, 2):
            raise ValueError(f"near_radius must be 1 or 2, got {near_radius!r}.")
        if near_radius < self.separation:
            raise ValueError(f"near_radius = {near_radius} is below the separation "
                             f"{self.separation}: the leaves' near field must cover the "
                             "boxes the M2L leaves out.")
        #: M2L box pairs per target box of a full level (the cost model's list length)
        self._list_length = 189 if self.separation == 1 else 875
        self.leaf_size = None if leaf_size is None else int(leaf_size)
        self.near_radius = int(near_radius)
        self.profile = bool(profile)
        self.timings: dict[str, float] = {}
        self.config: FMMConfig | None = None
        self._cache: dict = {}
        # work-array budget of the batched M2L (bytes)
        self._chunk_bytes = 2 << 30 if self.device.is_gpu else 256 << 20
        self.memory_budget = _memory_budget(self.device) if memory_budget is None \
            else float(memory_budget)

    # -- the evaluation -----------------------------------------------------
    def evaluate(self, x, alpha, sigma, targets=None, gradient=True, *, sigma_range=None,
                 root=None, check_root=True, depth=None, m2l_capacity=None):
        """u (M, 3) and ∇u (M, 3, 3) (or None) at ``targets`` (the sources when None).

        x, alpha (N, 3), sigma (N,) [or scalar], targets (M, 3): arrays of the
        evaluator's device (validated by :func:`vortexsim.induced_velocity`).

        gradient : bool or int
            True: ∇u at every target; False: none (None is returned).  An integer k
            (0 ≤ k ≤ M, explicit ``targets`` only) asks for ∇u at the first k targets
            alone, returned as (k, 3, 3): the others (e.g. passive tracers) get u only,
            which costs about half as much in the near field and a quarter in L2P.

        sigma_range : (float, float), optional
            (min σ, max σ) [L] when the caller knows them; otherwise read from ``sigma``.
        root : (array (3,), float), optional
            Lower corner and edge [L] of a cube holding every source and target (e.g. a
            time stepper's box with slack); otherwise the bounding cube.
        check_root : bool, default True
            Verify that a given ``root`` holds every point (a ValueError otherwise; one
            device-to-host sync).  With ``sigma_range``, ``root``, ``depth`` and
            ``check_root=False`` an evaluation makes no device-to-host transfer at all
            (the GPU then uses the dense M2L: the sparse one sizes its GEMMs on the
            host); the caller then guarantees containment.
        depth : int, optional
            Leaf level of the tree.  By default the level of least modelled cost for
            these points (:meth:`_cheapest_depth`; one small device-to-host transfer), or
            the ``leaf_size`` rule when that was given.  A time stepper may reuse
            ``config.depth`` of an earlier call.  Capped at the deepest level that the
            near-field reach and the memory budget allow (so it is always accurate).
        m2l_capacity : from :meth:`m2l_capacity`, optional
            Sizes for the sparse M2L of a sync-free call (GPU, 1/r far field), so that it
            needs no transfer either, and the occupied leaves of its target sets (thread
            blocks of the near field and L2P); ignored when its depth is not the tree's.
            Any positions are correct with any capacity (overflowing boxes are translated
            one by one); capacities from the same points give the fastest call.
        """
        xp = self.device.xp
        clock = _Clock(xp, self.profile and self.device.is_gpu)
        dtype = self.dtype
        n = x.shape[0]
        exclude_self = targets is None
        y = x if exclude_self else targets
        m = y.shape[0]
        k_grad = _gradient_count(gradient, m, exclude_self)
        u = xp.zeros((m, 3), dtype)
        grad_u = None if gradient is False else xp.zeros((k_grad, 3, 3), dtype)
        if n == 0 or m == 0:
            return u, grad_u
        x = xp.asarray(x, dtype=xp.float64)
        y = x if exclude_self else xp.asarray(y, dtype=xp.float64)
        alpha = xp.asarray(alpha, dtype=xp.float64)
        sigma = xp.broadcast_to(xp.asarray(sigma, dtype=xp.float64), (n,))
        # host scalars: core-radius range and root-cube edge, in one transfer on the GPU
        if root is None:
            lo, width = root_cube(x, y, xp)
        else:
            lo, width = xp.asarray(root[0], dtype=xp.float64), float(root[1])
        if sigma_range is None:
            if xp is np:
                s_min, s_max = float(sigma.min()), float(sigma.max())
            else:
                scalars = [sigma.min(), sigma.max()] + ([width] if root is None else [])
                s_min, s_max, *rest = (float(v) for v in xp.stack(scalars).get())
                width = rest[0] if rest else width
            clock.lap("sigma")
        else:
            s_min, s_max = (float(v) for v in sigma_range)
            if not 0 < s_min <= s_max:
                raise ValueError(f"sigma_range must be (min, max) with 0 < min <= max, "
                                 f"got {sigma_range!r}.")
        name = self.kernel.name
        if name in ("algebraic", "winckelmans") and s_max > s_min * (1 + 1e-12):
            raise ValueError(
                f"method='fmm' with kernel {name!r} needs a uniform sigma (got {s_min:g} to "
                f"{s_max:g}): its far field expands the regularized kernel, which depends on "
                "sigma. The singular far field would only reach a tolerance of about "
                f"1.5/rho^2 for that kernel. Use kernel='gaussian' or method='direct'.")
        green = E.green_function(name, s_min)
        reach = near_field_reach(name, self.tol, s_max)
        if root is None and not isinstance(width, float):
            width = float(width)
            clock.lap("root")
        P = self.order
        adaptive = (x, alpha, sigma, y, exclude_self, k_grad, lo, reach, s_min == s_max,
                    root is not None and check_root, clock, u, grad_u)
        if self.tree == "adaptive" and green.harmonic:
            adaptive_depth, width = self._adaptive_root(width, reach)
            if adaptive_depth >= 3:
                return self._evaluate_adaptive(adaptive_depth, width, *adaptive)
        depth_max, min_leaf = self._depth_limit(width, reach)
        occupied_leaves = None            # target leaves holding points, when counted
        depth_given = depth is not None
        if depth is not None:
            if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 0:
                raise ValueError(f"depth must be a non-negative integer, got {depth!r}.")
            depth = min(int(depth), depth_max)
        elif self.leaf_size is not None:
            depth = choose_depth(n, m, self.leaf_size, max_depth=depth_max)
        else:
            # one small device-to-host transfer: the near-field pair counts per depth
            width_max = _stretched_width(width, depth_max, min_leaf)
            pairs, occupied = _near_pairs_by_depth(x, y, lo, width_max, depth_max,
                                                   self.near_radius, xp)
            clock.lap("depth")
            if self.tree == "auto":
                adaptive_depth, adaptive_width = self._adaptive_root(width, reach)
                if self._prefers_adaptive(pairs, m, adaptive_depth, green):
                    return self._evaluate_adaptive(adaptive_depth, adaptive_width, *adaptive)
            depth = self._cheapest_depth(pairs, green)
            occupied_leaves = float(occupied[depth])
        # a root cube stretched so that the leaves are no narrower than the reach
        width = _stretched_width(width, depth, min_leaf)
        P = self._order_at(depth)
        self.config = FMMConfig(P, depth, self.near_radius, reach, self.leaf_size)
        clock.lap("setup")
        # target sets: (first index, points, with ∇u); targets with and without ∇u are
        # sorted into the leaves separately, so each kernel launch is uniform in work
        sets = [(0, y, k_grad > 0)] if exclude_self else target_sets(y, k_grad)
        check = root is not None and check_root
        tree = build_tree(x, sets[0][1], depth, xp, lo=lo, width=width, check=check)
        trees = [tree] + [with_targets(tree, pts, xp, check=check) for _, pts, _ in sets[1:]]
        xs, alpha_s, sigma_s = x[tree.src_order], alpha[tree.src_order], sigma[tree.src_order]
        parts = [_TargetPart(t, first, xs if exclude_self else pts[t.tgt_order], grad)
                 for t, (first, pts, grad) in zip(trees, sets)]
        # the far field sees the union of the target sets (boxes without targets skip M2L)
        far_tree = tree if len(trees) == 1 else dataclasses.replace(
            tree, tgt_start=sum(t.tgt_start for t in trees))
        clock.lap("tree")

        # A caller that asked for no transfers (sigma_range, root, depth given,
        # check_root=False: a time stepper) gets the dense M2L, which needs none.
        sync_free = sigma_range is not None and root is not None and not check_root \
            and depth_given
        # GPU: the near field runs on its own stream, overlapping the sparse-list
        # transfer and the far field (upward pass, M2L), which are latency-bound; the
        # far field waits for it only before L2P adds into its sums.  Profiling keeps
        # one stream, so that the stage laps stay separate.
        # Each target set gets its own stream: the elements' near field (∇u, few
        # blocks) then runs next to the tracers' instead of after it.
        side = self.device.is_gpu and not clock.sync
        if self.device.is_gpu:
            # the neighbour table on the device before the streams fork (created lazily
            # inside one target set's stream, another set's stream could read it before
            # its copy landed)
            self._near_table(depth)
        if side:
            import cupy as cp  # noqa: PLC0415
            main = cp.cuda.get_current_stream()
            tree_ready = cp.cuda.Event(disable_timing=True)
            tree_ready.record(main)
            near_streams = [self._cached(("near_stream", i), lambda: cp.cuda.Stream(
                non_blocking=True)) for i in range(len(sets))]
            for stream in near_streams:
                stream.wait_event(tree_ready)
        plan = (m2l_capacity if sync_free and m2l_capacity is not None
                and m2l_capacity[0] == depth else None)
        if plan is not None and len(plan) > 2 and len(plan[2]) == len(parts):
            for part, occ in zip(parts, plan[2]):
                part.occupied = occ
        else:
            for part in parts:
                part.occupied = occupied_leaves
        near_done = []
        for i, part in enumerate(parts):
            with near_streams[i] if side else contextlib.nullcontext():
                part.u, part.g = self._near(part.tree, xs, alpha_s, sigma_s, part.ys,
                                            exclude_self, part.grad, part.occupied,
                                            uniform=s_min == s_max)
            if side:
                near_done.append(cp.cuda.Event(disable_timing=True))
                near_done[-1].record(near_streams[i])
        if not side:
            clock.lap("near")
        if depth >= 2:
            multipoles = self._upward(tree, xs, alpha_s, P, clock, green.harmonic)
            # the sparse-M2L lists after the upward pass is queued: their one transfer
            # then waits on it instead of leaving the GPU idle
            capacity = plan[1] if plan is not None else None
            counts = plan[3] if plan is not None and len(plan) > 3 else None
            prepared = (plan.layouts if isinstance(plan, M2LPlan) and plan.order == P
                        else None)
            # (the sparse M2L's tables are those of the standard separation)
            sparse = (self._m2l_sparsity(far_tree, P, capacity, counts, prepared)
                      if green.harmonic and self.device.is_gpu and self.separation == 1
                      and (not sync_free or capacity is not None) else None)
            clock.lap("m2l_lists")
            locals_ = self._m2l(far_tree, multipoles, green, P, clock, sparse)
        for event in near_done:                                    # before L2P adds
            main.wait_event(event)
        if depth >= 2:
            self._downward(far_tree, locals_, parts, P, clock, green.harmonic)
        for part in parts:
            order = part.tree.tgt_order
            u[order + part.first if part.first else order] = part.u.astype(dtype, copy=False)
            if part.grad:
                grad_u[order] = part.g.astype(dtype, copy=False)
        self.timings = clock.finish()
        logger.debug("FMM %s P=%d depth=%d timings %s", name, P, depth, self.timings)
        return u, grad_u

    #: tree="auto" takes the adaptive tree when the level-uniform tree at its deepest
    #: admissible level still has more than this many times the near-field pairs that
    #: balanced leaves would give (:meth:`_prefers_adaptive`)
    AUTO_TREE_FACTOR = 2.0

    def _adaptive_root(self, width, reach):
        """(depth, root-cube edge [L]) of the adaptive tree for a bounding cube of edge
        ``width``: the deepest level whose leaves, with the cube stretched a little (as
        the uniform tree's), are as wide as the near field's reach / ρ."""
        depth, min_leaf = self._depth_limit(width, reach, ADAPTIVE_MAX_DEPTH)
        return depth, _stretched_width(width, depth, min_leaf)

    def _prefers_adaptive(self, pairs, m, adaptive_depth, green):
        """Whether ``tree="auto"`` takes the adaptive tree for these points.

        ``pairs`` (depth_max + 1,): the level-uniform trees' near-field pair counts
        (:func:`_near_pairs_by_depth`); ``adaptive_depth``: :meth:`_adaptive_root`'s.  The adaptive tree pays only where the uniform
        one cannot refine far enough: its deepest level (``depth_max``: the memory
        budget's) lies above the adaptive tree's (where leaves are the reach wide), and
        even there a target meets more than :attr:`AUTO_TREE_FACTOR` × stencil ×
        leaf_size / 2 sources, the most that balanced adaptive leaves (≤ leaf_size
        sources + targets each) put in a stencil.  Elsewhere the uniform tree is
        faster: on the H100 at 2^20 points, uniform Gaussian (1.0× the balanced pairs)
        60 against 84 ms and rings with tracers 14 against 58 ms on the adaptive tree;
        the Plummer cloud of bench_fmm (~10×, depth 5 of 7) 781 against 108 ms; on
        2 CPU cores a 2×10^4-point Plummer cloud, singular (3.8×), 28.3 against 16.1 s.
        The factor 2 lies between the measured points.
        Needs the 1/r far field and near_radius = separation (the adaptive tree's).
        """
        if not green.harmonic or self.near_radius != self.separation or m == 0:
            return False
        depth_max = len(pairs) - 1
        if depth_max >= adaptive_depth or adaptive_depth < 3:
            return False
        leaf = self.ADAPTIVE_LEAF_SIZE[self.device.kind]
        stencil = (2 * self.near_radius + 1) ** 3
        return float(pairs[depth_max]) > self.AUTO_TREE_FACTOR * m * stencil * leaf / 2

    #: default leaf_size of the adaptive tree (most points a leaf box may hold), per
    #: device kind.  GPU: the 2^20-point Plummer cloud of bench_fmm (Gaussian, tol 1e-6,
    #: H100, session 6) took 192 / 167 / 249 ms with 256 / 512 / 1024 (first build),
    #: 138 / 130–134 ms with 384 / 512 (box-level build)
    ADAPTIVE_LEAF_SIZE = {"gpu": 512, "cpu": 64}

    def _evaluate_adaptive(self, depth, width, x, alpha, sigma, y, exclude_self, k_grad, lo,
                           reach, uniform, check, clock, u, grad_u):
        """:meth:`evaluate` on the adaptive tree (:mod:`vortexsim.fmm.adaptive`) of
        ``depth`` levels in the cube [lo, lo + width)³ (:meth:`_adaptive_root`)."""
        xp = self.device.xp
        if check:
            _check_cube(x, y, lo, width, xp)
        leaf_size = self.leaf_size or self.ADAPTIVE_LEAF_SIZE[self.device.kind]
        P = self.order
        self.config = FMMConfig(P, depth, self.near_radius, reach, leaf_size, "adaptive")
        clock.lap("setup")
        uu, gg, tree = adaptive_fmm(self, x, alpha, sigma, y, lo, width, depth, leaf_size,
                                    exclude_self, k_grad > 0, uniform, P, clock)
        u[...] = uu.astype(u.dtype, copy=False)
        if k_grad:
            grad_u[...] = gg[:k_grad].astype(grad_u.dtype, copy=False)
        self.timings = clock.finish()
        logger.debug("FMM %s adaptive P=%d depth=%d boxes=%d timings %s", self.kernel.name, P,
                     depth, tree.n_boxes, self.timings)
        return u, grad_u

    def _side_stream(self):
        """A second, non-blocking CUDA stream of this evaluator (the adaptive tree's
        near field runs there while the host builds the rest of the tree)."""
        import cupy as cp  # noqa: PLC0415
        return self._cached(("side_stream",), lambda: cp.cuda.Stream(non_blocking=True))

    @property
    def parent_radius(self):
        """Radius (boxes) within which a box's parent must lie from the parent of a box
        it translates from: the separation (1: the 3³ neighbours, 2: the 5³)."""
        return self.separation

    @property
    def _offset_radius(self):
        """Half-width of the offset cube holding every M2L offset: 2ρ + 1 (3 or 5)."""
        return 2 * self.parent_radius + 1

    def _order_at(self, depth):
        """Expansion order of a tree of ``depth`` levels: the given order, else the
        tol rule's lowered where measured (:func:`shallow_order`)."""
        if self._order_given:
            return self.order
        return shallow_order(self.tol, self.kernel.name, depth, self.order)

    def _sep(self, level, L):
        """M2L separation rule of a level of a tree of L levels: translate from boxes at
        least this many boxes away (the leaves' near stencil, or the parents' radius)."""
        return self.near_radius + 1 if level == L else self.parent_radius + 1

    def _depth_limit(self, width, reach, depth_max=None):
        """Deepest admissible leaf level for a root cube of edge ``width`` [L] (at most
        ``depth_max``, by default the memory budget's; leaves no narrower than
        reach / near_radius), and that narrowest leaf."""
        if depth_max is None:
            depth_max = self._max_depth(self.order)
        min_leaf = reach / self.near_radius
        if reach > 0:
            # the deepest level whose leaves still reach `reach` with the stencil
            depth_max = min(depth_max, max(0, math.ceil(math.log2(width / min_leaf))))
        return depth_max, min_leaf

    #: capacity of a sparse-M2L class: count + count / CAPACITY_SLACK + 4, at most the
    #: class's boxes (points move a little between the stages of a step; a margin that
    #: is too large would push the small upper levels back to the dense M2L)
    CAPACITY_SLACK = 8

    def m2l_capacity(self, x, sigma_range, root, depth, targets=()):
        """Sizes of the sparse M2L for sync-free calls at these sources (one transfer).

        x (N, 3) [L]: the sources; sigma_range, root, depth: as :meth:`evaluate` will get
        them; targets: the target sets of those calls (the targets, or with an integer
        ``gradient=k`` the first k and the rest), whose occupied leaves size the near
        field's thread blocks.  Returns an :class:`M2LPlan` ``(depth, capacity, occupied,
        counts, order, layouts)`` with the leaf level the tree will have, host int64
        arrays (depth − 1, 8) of the non-empty
        source boxes per level 2..depth and parity class (``counts``) and of those plus
        a margin (:attr:`CAPACITY_SLACK`, ``capacity``), and the number of leaves holding
        points of each target set; or None where no sparse M2L can run (CPU,
        regularized far field, wide separation, depth < 2).
        A time stepper calls it once per step at the step's start positions, so the
        result is a function of the state alone (restarts stay bitwise).
        """
        xp = self.device.xp
        s_min, s_max = (float(v) for v in sigma_range)
        if (not self.device.is_gpu or self.separation != 1
                or not E.green_function(self.kernel.name, s_min).harmonic):
            return None
        lo, width = xp.asarray(root[0], dtype=xp.float64), float(root[1])
        reach = near_field_reach(self.kernel.name, self.tol, s_max)
        depth_max, min_leaf = self._depth_limit(width, reach)
        depth = min(int(depth), depth_max)
        if depth < 2 or x.shape[0] == 0:
            return None
        width = _stretched_width(width, depth, min_leaf)             # as evaluate
        def occupancy(pts):                # 1 for each leaf holding a point of pts
            hit = xp.zeros(8 ** depth, dtype=xp.int64)
            if pts.shape[0]:
                hit[morton_keys(xp.asarray(pts, dtype=xp.float64), lo, width, depth,
                                xp).astype(xp.int64)] = 1
            return hit

        occupied = occupancy(x)
        leaves = [xp.broadcast_to(occupancy(pts).sum(), (8,)) for pts in targets]
        counts = []
        for level in range(depth, 1, -1):
            counts.append(occupied.reshape(-1, 8).sum(axis=0))
            occupied = occupied.reshape(-1, 8).max(axis=1)
        out = xp.stack(counts[::-1] + leaves).get()                # one transfer
        counts, leaves = out[:depth - 1], tuple(int(v[0]) for v in out[depth - 1:])
        boxes = (8 ** np.arange(2, depth + 1) // 8)[:, None]       # boxes per class
        cap = np.minimum(counts + counts // self.CAPACITY_SLACK + 4, boxes)
        # the sparse levels' layouts and small device tables, in one copy now (the
        # stream is idle after the transfer) instead of four per level and evaluation
        P = self._order_at(depth)
        levels = range(2, depth + 1)
        layouts = [self._sparse_layout(depth, level, P, cap[row], int(counts[row].sum()))
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

    # -- stages ---------------------------------------------------------------
    def _near(self, tree, xs, alpha_s, sigma_s, ys, exclude_self, gradient, occupied=None,
              uniform=False, nbr=None):
        """Near field u (M, 3), ∇u (M, 3, 3) of the sorted targets, float64 accumulators.

        ``uniform``: every σ is the same (the σ range is one value; GPU: source records
        without per-source parameters, bitwise the same result).  ``nbr``: the target
        leaves' stencils (n_leaves, (2r+1)³) as indices into ``tree.src_start`` (−1:
        none; the middle column is the leaf's own source box), on the evaluator's
        device; default the level-uniform :meth:`_neighbors` of ``tree.depth``.  With
        ``exclude_self`` a leaf's targets are its own box's sources, in the same order."""
        if self.device.is_gpu:
            return self._near_cuda(tree, xs, alpha_s, sigma_s, ys, exclude_self, gradient,
                                   occupied, uniform, nbr)
        if nbr is None:
            nbr = self._neighbors(tree.depth)
        own_col = nbr.shape[1] // 2
        m = ys.shape[0]
        u_s, w_s, g_s = np.zeros((m, 3)), np.zeros((m, 3)), np.zeros((m, 3, 3))
        ss, ts = tree.src_start, tree.tgt_start
        xs_, as_, sg_, ys_ = (a.astype(self.dtype) for a in (xs, alpha_s, sigma_s, ys))
        cut = self._table_cut() if self.kernel.name == "gaussian" else None

        def leaf_sum(leaf):
            t0, t1 = int(ts[leaf]), int(ts[leaf + 1])
            boxes = nbr[leaf][nbr[leaf] >= 0]
            if boxes.size == 0:
                return
            src = np.concatenate([np.arange(ss[b], ss[b + 1]) for b in boxes])
            if src.size == 0:
                return
            # target chunks keep the pair block near 2^18 pairs (O(N + M) memory even
            # when one leaf holds most points)
            step = max(1, (1 << 18) // src.size)
            for c0 in range(t0, t1, step):
                c1 = min(t1, c0 + step)
                d = ys_[c0:c1, None, :] - xs_[None, src, :]
                mask = None
                if exclude_self:            # target t0 + q of the leaf: source ss[own] + q
                    own = ss[nbr[leaf, own_col]] - t0
                    mask = (np.arange(c0, c1) + own)[:, None] == src[None, :]
                ub, wb, gb = (np.zeros_like(a[c0:c1], dtype=self.dtype) for a in (u_s, w_s, g_s))
                _accumulate_block(self.kernel, d, as_[src], sg_[src], mask, gradient, ub, wb, gb,
                                  singular_from=cut)
                u_s[c0:c1], w_s[c0:c1], g_s[c0:c1] = ub, wb, gb

        # leaves write disjoint target ranges: threads (NumPy releases the GIL) keep the
        # result bitwise identical to a serial loop
        leaves = np.nonzero(ts[1:] > ts[:-1])[0]
        workers = min(len(leaves), os.cpu_count() or 1)
        if workers > 1:
            with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                list(pool.map(leaf_sum, leaves))
        else:
            for leaf in leaves:
                leaf_sum(leaf)
        return INV_4PI * u_s, (INV_4PI * (skew(w_s) - g_s) if gradient else None)

    def _neighbors(self, depth):
        """The leaf level's near-field stencil (host, :func:`neighbor_table`, cached)."""
        return self._cached(("nbr", depth, self.near_radius),
                            lambda: neighbor_table(depth, self.near_radius, np))

    def _near_table(self, depth):
        """:meth:`_neighbors` on the GPU (cached per depth)."""
        import cupy as cp  # noqa: PLC0415
        return self._cached(("nbr_d", depth, self.near_radius),
                            lambda: cp.asarray(self._neighbors(depth)))

    def _near_cuda(self, tree, xs, alpha_s, sigma_s, ys, exclude_self, gradient, occupied,
                   uniform=False, nbr=None):
        import cupy as cp  # noqa: PLC0415
        from ..kernels.direct import source_parameters  # noqa: PLC0415
        from ..kernels.modules import CTYPES, get_function  # noqa: PLC0415
        dtype = self.dtype
        nbr_d = self._near_table(tree.depth) if nbr is None else nbr
        # one target per thread: two in float32 measured slower (21 vs 18 ms at 2^20,
        # H100, 2026-11-22: 106 registers instead of 64)
        block = self._near_block_for(ys.shape[0], occupied or tree.n_leaves)
        name = (f"p2p_near<{CTYPES[dtype.name]},{self.kernel.code},"
                f"{'true' if gradient else 'false'},{block},256,"
                f"{'true' if uniform else 'false'}>")
        fn = get_function("fmm.cu", name)
        m = ys.shape[0]
        u = cp.empty((m, 3), dtype)
        g = cp.empty((m, 3, 3), dtype) if gradient else u
        param = source_parameters(self.kernel, sigma_s.astype(dtype), cp).astype(dtype)
        # blocks of `block` targets of one leaf each (so that a few crowded leaves still
        # fill the GPU); their number is bounded by n_leaves + m / block, which sizes the
        # grid without a host transfer (spare blocks return at once)
        chunk_start, grid = _chunk_starts(tree, block, m)
        fn((grid,), (block,),
           (cp.ascontiguousarray(xs, dtype=dtype), cp.ascontiguousarray(alpha_s, dtype=dtype),
            cp.ascontiguousarray(param), tree.src_start, cp.ascontiguousarray(ys, dtype=dtype),
            tree.tgt_start, nbr_d, np.int32(nbr_d.shape[1]), np.int32(1 if exclude_self else 0),
            chunk_start, np.int32(tree.n_leaves), dtype.type(self._table_cut()), u, g))
        return (u.astype(cp.float64, copy=False),
                (g.astype(cp.float64, copy=False) if gradient else None))

    def _table_cut(self):
        """s = (r/σ)² from which the near field uses the singular pair factors:
        ρ*(tol)² for the Gaussian (beyond the reach 1 − q, 1 − f/3 < tol/10, as the far
        field assumes; the cutoff table is then read only within it), capped at 81."""
        if self.kernel.name != "gaussian":
            return 81.0
        return min(81.0, _gaussian_rho_star(self.tol) ** 2)

    def _shift_operators(self, P):
        """Level-independent M2M and L2L operators on normalized expansions (cached).

        With M̃_m = M_m / w^|m| and L̃_k = L_k w^|k| (w: the box width of the level), a
        child → parent M2M is M̃_p = Σ_c T_c M̃_c with T_c = diag(2^−|m|) S_c and a
        parent → child L2L is L̃_c = R_c diag(2^−|k|) L̃_p, where S_c, R_c are the exact
        shifts for a unit child width (:func:`expansions.shift_matrices`).  Returns
        T (n, 8n) = [T_0 … T_7] and R (8n, n) = [R_0; …; R_7] on the evaluator's device.
        """
        xp = self.device.xp
        return self._cached(("shift", P), lambda: tuple(
            xp.asarray(a) for a in _shift_operators_host(P)))

    def _harmonic_bases(self, P):
        """(U, V) of :func:`expansions.harmonic_bases` on the evaluator's device (cached)."""
        xp = self.device.xp
        return self._cached(("harmonic", P),
                            lambda: tuple(xp.asarray(a) for a in E.harmonic_bases(P)))

    def _compressed(self, M, P):
        """Compressed multipoles M̂ = Vᵀ M̃ (r, B, 3), coefficient-major, of normalized
        ones M̃ (B, n, 3) (1/r far field, :meth:`_harmonic_bases`)."""
        _, V = self._harmonic_bases(P)
        n, r = V.shape
        B = M.shape[0]
        return (V.T @ M.transpose(1, 0, 2).reshape(n, B * 3)).reshape(r, B, 3)

    def _decompressed(self, Lh, P):
        """Normalized locals L̃ = U L̂ (B, n, 3), box-major and contiguous (for L2P), of
        compressed ones L̂ (r, B, 3)."""
        U, _ = self._harmonic_bases(P)
        n, r = U.shape
        B = Lh.shape[1]
        return self.device.xp.ascontiguousarray(
            (U @ Lh.reshape(r, B * 3)).reshape(n, B, 3).transpose(1, 0, 2))

    def _compressed_shift_operators(self, P):
        """M2M and L2L of the 1/r far field on compressed expansions (cached).

        With the bases of :func:`expansions.harmonic_bases` (orthonormal, r = (P+1)²
        columns), multipoles enter the M2L only through M̂ = Vᵀ M̃ and locals are
        L̃ = U L̂.  A shift maps potential-free multipoles (span V^⊥, degree by degree)
        to potential-free ones and harmonic local polynomials to harmonic ones, so
        M̂_p = Σ_c (Vᵀ T_c V) M̂_c and L̂_c = (Uᵀ R_c U) L̂_p exactly (round-off only):
        r² instead of n² per box and child (P = 16: 8.4e4 instead of 9.4e5).  Returns
        Tc (r, 8r) and Rc (8r, r) on the evaluator's device.
        """
        def build():
            T, R = _shift_operators_host(P)
            U, V = E.harmonic_bases(P)
            n = U.shape[0]
            Tc = np.concatenate([V.T @ T[:, c * n:(c + 1) * n] @ V for c in range(8)], axis=1)
            Rc = np.concatenate([U.T @ R[c * n:(c + 1) * n] @ U for c in range(8)], axis=0)
            xp = self.device.xp
            return xp.asarray(Tc), xp.asarray(Rc)
        return self._cached(("shift_compressed", P), build)

    def _upward(self, tree, xs, alpha_s, P, clock, harmonic=False):
        """Normalized multipoles per level, float64: dict level → M̃ (8^level, n, 3), or
        with ``harmonic`` (1/r far field) the compressed M̂ = Vᵀ M̃ (r, 8^level, 3),
        coefficient-major, whose M2M is r² per child (:meth:`_compressed_shift_operators`)."""
        L = tree.depth
        mi = E.multi_indices(P)
        M = self._p2m(xs, alpha_s, tree.src_start, self._box_centers(tree, L),
                      float(tree.box_width(L)), P)
        clock.lap("p2m")
        n = mi.n
        if harmonic:
            out = {L: self._compressed(M, P)}
            Tc, _ = self._compressed_shift_operators(P)
            r = Tc.shape[0]
            for level in range(L, 2, -1):                          # M2M: one GEMM per level
                bp = 8 ** (level - 1)
                X = out[level].reshape(r, bp, 8, 3).transpose(2, 0, 1, 3).reshape(8 * r, bp * 3)
                out[level - 1] = (Tc @ X).reshape(r, bp, 3)
            clock.lap("m2m")
            return out
        T, _ = self._shift_operators(P)
        out = {L: M}
        for level in range(L, 2, -1):                              # M2M: one GEMM per level
            bp = 8 ** (level - 1)
            X = out[level].reshape(bp, 8, n, 3).transpose(1, 2, 0, 3).reshape(8 * n, bp * 3)
            out[level - 1] = (T @ X).reshape(n, bp, 3).transpose(1, 0, 2)
        clock.lap("m2m")
        return out

    def _p2m(self, xs, alpha_s, src_start, centres, w, P):
        """Normalized multipoles M̃ (B, n, 3) of B boxes (centres (B, 3), edge w [L])
        from their sources xs, alpha_s[src_start[b]:src_start[b + 1]] (float64)."""
        xp = self.device.xp
        mi = E.multi_indices(P)
        B = centres.shape[0]
        if self.device.is_gpu:
            from ..kernels.modules import get_function  # noqa: PLC0415
            kidx = self._cached(("kidx", P), lambda: xp.asarray(mi.k.astype(np.int32)))
            M = xp.empty((B, mi.n, 3))
            if B:
                get_function("fmm.cu", f"p2m_leaf<{P},128>")(
                    (B,), (128,),
                    (xp.ascontiguousarray(xs), xp.ascontiguousarray(alpha_s), src_start,
                     xp.ascontiguousarray(centres), np.float64(1.0 / w), kidx, M))
            return M
        M = np.zeros((B, mi.n, 3))
        for box in np.nonzero(src_start[1:] > src_start[:-1])[0]:   # one GEMM per box
            s0, s1 = src_start[box], src_start[box + 1]
            M[box] = E.monomials((centres[box] - xs[s0:s1]) / w, P, np).T @ alpha_s[s0:s1]
        return M

    def _class_offsets(self, sep):
        """Per parity class p = key & 7 the indices O_p of its M2L offsets into
        ``offsets_cube(2ρ + 1)`` (host int arrays; the same at every level)."""
        rho, radius = self.parent_radius, self._offset_radius
        return [np.nonzero(_interacts(np.array([p & 1, (p >> 1) & 1, (p >> 2) & 1]),
                                      E.offsets_cube(radius), sep, rho))[0]
                for p in range(8)]

    def _m2l_pairs_host(self, level, sep):
        """Host index tables: [(offset d (3,), target boxes, source boxes)] for one level."""
        def build():
            rho, radius = self.parent_radius, self._offset_radius
            nbr = neighbor_table(level, radius, np)
            ix, iy, iz = morton_decode(np.arange(8 ** level, dtype=np.uint64), level, np)
            parity = np.stack([ix, iy, iz], axis=1) % 2
            pairs = []
            for o, d in enumerate(E.offsets_cube(radius)):
                ok = (nbr[:, o] >= 0) & _interacts(parity, d, sep, rho)
                tgt = np.nonzero(ok)[0]
                if tgt.size:
                    pairs.append((d, tgt, nbr[tgt, o]))
            return pairs
        return self._cached(("m2l_pairs", level, sep), build)

    def _m2l_pairs(self, level, sep):
        """:meth:`_m2l_pairs_host` with the index arrays on the evaluator's device."""
        pairs = self._m2l_pairs_host(level, sep)
        if self.device.is_gpu:
            xp = self.device.xp
            return self._cached(("m2l_pairs_d", level, sep),
                                lambda: [(d, xp.asarray(t), xp.asarray(s)) for d, t, s in pairs])
        return pairs

    def _m2l_classes(self, level, sep):
        """Per parity class p = key & 7: (offset indices O_p into the offsets of radius
        2ρ + 1 (ρ: :attr:`parent_radius`; OFFSETS_3 for the standard FMM), gather (B/8, |O_p|)).

        gather[j, q] is the source box of target box p + 8j at offset O_p[q], or 8^level
        (a zero column) where that box lies outside the grid.
        """
        def build():
            nbr = neighbor_table(level, self._offset_radius, np)
            zero = 8 ** level
            classes = []
            for p, offsets in enumerate(self._class_offsets(sep)):
                g = nbr[p::8][:, offsets]
                classes.append((offsets, self.device.xp.asarray(np.where(g >= 0, g, zero))))
            return classes
        return self._cached(("m2l_classes", level, sep), build)

    def _m2l(self, tree, multipoles, green, P, clock, sparse=None):
        """Normalized local expansions L̃ per level (levels 2..L) from M2L.

        ``sparse``: :meth:`_m2l_sparsity` of the tree (GPU), or None for the dense M2L.
        """
        L = tree.depth
        locals_ = {}
        # All levels on the current stream.  (Session 3 ran the upper levels on a second
        # stream next to the leaf level; cuBLAS shares one handle, and its workspace,
        # across streams, and the sparse-vs-dense time-stepping test then differed by
        # 3e-9 in some runs, so the levels no longer overlap: docs/fmm-design.md.)
        for level in range(2, L + 1):
            locals_[level] = self._m2l_level(tree, multipoles, green, P, clock, sparse, level)
        clock.laps["m2l"] = sum(v for k, v in clock.laps.items() if k.startswith("m2l_"))
        return locals_

    def _m2l_level(self, tree, multipoles, green, P, clock, sparse, level):
        """Normalized local expansion L̃ (8^level, n, 3) of one level from its M2L."""
        xp = self.device.xp
        L = tree.depth
        M = multipoles[level]
        sep = self._sep(level, L)
        w = float(tree.box_width(level))
        if green.harmonic:
            # 1/r: A(w)[k, m] = w^−(1+|k|+|m|) A(1)[k, m] and A(1) = U C Vᵀ exactly
            # (harmonic_bases), so on normalized expansions L̃ = U (C (Vᵀ M̃)) / w.
            # Boxes of one parity class (key & 7, i.e. every 8th box) share their
            # interaction offsets O_p, so per class one GEMM over all its boxes and
            # the three components:
            #   L̃[:, (t, c)] = [C_o]_{o ∈ O_p} (k-major) · M̃[k, src(t, o), c]
            # on compressed, coefficient-major multipoles (no zero blocks).
            # The multipoles arrive compressed (M̂ = Vᵀ M̃, (r, B, 3), :meth:`_upward`) and
            # the locals leave compressed (L̂ = C M̂ / w, L̃ = U L̂, :meth:`_downward`).
            # In float32 runs with tol ≥ 1e-5 these GEMMs run in float32: normalized
            # expansions are O(1), so float32 rounding (6e-8) stays far below tol.
            mdt = self._m2l_dtype()
            Mt = M
            r, B = Mt.shape[0], Mt.shape[1]
            if sparse is not None and sparse[level] is not None:
                Lt = self._m2l_sparse(tree, level, sep, xp.ascontiguousarray(Mt), P,
                                      sparse[level], mdt)
                clock.lap(f"m2l_{level}")
                return Lt.astype(np.float64, copy=False) / w
            Mcm = xp.concatenate([Mt.astype(mdt), xp.zeros((r, 1, 3), mdt)], axis=1)
            Lt = xp.empty((r, B, 3), mdt)                      # Mcm: (r, B + 1, 3)
            Mcc = np.ascontiguousarray(Mcm.transpose(0, 2, 1)) if xp is np else None
            for p, (offsets, gather) in enumerate(self._m2l_classes(level, sep)):
                for j0, j1, Y, first in self._class_products(Mcm, Mcc, gather, p, offsets,
                                                             P, sep, mdt):
                    if first:
                        Lt[:, p + 8 * j0:p + 8 * j1:8, :] = Y
                    else:
                        Lt[:, p + 8 * j0:p + 8 * j1:8, :] += Y
            clock.lap(f"m2l_{level}")
            return Lt.astype(np.float64, copy=False) / w
        else:
            # regularized G: operators depend on σ/w, built per level, one GEMM per
            # offset, on de-normalized expansions (M = w^|m| M̃, L̃ = w^|k| L)
            degree = E.multi_indices(P).k.sum(axis=1).astype(np.float64)
            wdeg = xp.asarray(w ** degree)
            M = M * wdeg[None, :, None]
            idx, binom = (xp.asarray(a) for a in E._m2l_tables(P))
            pairs = self._m2l_pairs(level, sep)
            Lc = xp.zeros_like(M)
            R = xp.asarray(np.array([-d * w for d, _, _ in pairs]).reshape(-1, 3))  # c_L − c_M
            T = E.kernel_taylor(green, R, 2 * P, xp)
            for o, (_, tgt, src) in enumerate(pairs):
                # full square operator (|k|, |m| ≤ P): the total-degree truncation
                # |k| + |m| ≤ P is 11× cheaper at P = 12 but 50× less accurate here
                Lc[tgt] += _apply(T[o][idx] * binom, M[src], xp)
            Lc *= wdeg[None, :, None]
        clock.lap(f"m2l_{level}")
        return xp.ascontiguousarray(Lc)


    #: offsets per group of the wide separation's CPU M2L (cores cut per group: at P = 14,
    #: 2×10^4 points, depth 3, peak memory 0.9–1.2 GB instead of ~3 GB with cached
    #: per-class cores; the M2L time is the same within the run-to-run spread)
    WIDE_CORE_GROUP = 256

    #: levels whose fraction of non-empty source boxes is below this use the sparse M2L
    SPARSE_M2L_FRACTION = 0.5
    #: None: the sparse M2L picks per level between one GEMM per source class and one
    #: GEMM against all 343 cores by a cost model; True / False force one (tests)
    SPARSE_M2L_UNIFIED = None

    def _class_products(self, Mcm, Mcc, gather, p, offsets, P, sep, mdt):
        """M2L of parity class ``p`` on compressed multipoles, in chunks of target boxes.

        Mcm (r, S + 1, 3): the level's multipoles M̂ and a zero column (index S); Mcc:
        the same as (r, 3, S + 1) on the CPU (None on the GPU); gather (B_p, |O_p|):
        the source column of each target box at each of the class's ``offsets``.
        Yields (j0, j1, Y (r, j1 − j0, 3), first): the locals (times w) of target boxes
        j0..j1 of the class from one group of offsets (``first``: the group that
        assigns; later groups add).
        """
        xp = self.device.xp
        r = Mcm.shape[0]
        nb = gather.shape[0]
        # GPU: one gather and GEMM for the three components; CPU: one per component
        # (NumPy gathers single columns of a (r, 3, S+1) array 10× faster than
        # 3-vectors from the middle axis)
        ncomp = 3 if xp is not np else 1
        for part, Kp in self._core_groups(P, sep, p, offsets, mdt):
            sub = offsets[part]
            first = part.start in (None, 0)
            chunk = max(1, int(self._chunk_bytes
                               // (len(sub) * r * ncomp * np.dtype(mdt).itemsize)))
            for j0 in range(0, nb, chunk):
                j1 = min(nb, j0 + chunk)
                g = gather[j0:j1, part].T
                if xp is np:
                    Y = np.empty((r, j1 - j0, 3), mdt)
                    for c in range(3):
                        Y[:, :, c] = Kp @ Mcc[:, c, g].reshape(r * len(sub), j1 - j0)
                else:
                    X = _gather_columns(Mcm, g).reshape(r * len(sub), 3 * (j1 - j0))
                    Y = (Kp @ X).reshape(r, j1 - j0, 3)
                yield j0, j1, Y, first

    def _core_groups(self, P, sep, p, offsets, mdt):
        """(slice of ``offsets``, cores (r, r·|slice|)) of parity class ``p``'s M2L.

        The class's cores are cached, except for the wide separation on the CPU: there
        8 classes × 875 offsets would hold ~3.7 GB at P = 15, so its offsets go in
        groups (:attr:`WIDE_CORE_GROUP`) whose cores are cut from the unit cores when
        needed (K itself: 1331 r², 0.7 GB at P = 15)."""
        xp = self.device.xp
        radius = self._offset_radius
        if self.separation == 1 or xp is not np:
            yield slice(None), self._cached(
                ("m2l_class_cores", P, sep, p, mdt), lambda: xp.asarray(
                    _class_cores(E.unit_m2l_cores(P, radius), offsets), dtype=mdt))
            return
        step = self.WIDE_CORE_GROUP
        for q in range(0, len(offsets), step):
            yield slice(q, q + step), _class_cores(
                E.unit_m2l_cores(P, radius), offsets[q:q + step]).astype(mdt, copy=False)

    def _m2l_sparsity(self, tree, P, capacity=None, counts=None, prepared=None):
        """Per level: None (dense M2L) or (per class: (n_active, active list), colmap, tgt counts).

        Source and target counts per box of every level come from the CSR starts; the
        numbers of non-empty source boxes per (level, parity class) cross to the host in
        one transfer (they size the GEMMs).  The lists are built on the device.

        ``capacity`` (host int array (L − 1, 8), :meth:`m2l_capacity`) replaces that
        transfer: the GEMMs get these sizes (spare rows translate box 0 and are never
        read), and an active box beyond its class's capacity is marked −2 in ``colmap``
        for ``m2l_gather_sum`` to translate on the fly; ``counts`` (same shape: the
        non-empty boxes the capacities were made from) then decides sparse or dense, and
        ``prepared`` (:attr:`M2LPlan.layouts`, made from both) brings each level's layout
        and device tables, so that the call copies nothing to the device.
        """
        xp = self.device.xp
        L = tree.depth
        src = {L: xp.diff(tree.src_start)}
        tgt = {L: xp.diff(tree.tgt_start)}
        for level in range(L, 2, -1):
            src[level - 1] = src[level].reshape(-1, 8).sum(axis=1)
            tgt[level - 1] = tgt[level].reshape(-1, 8).sum(axis=1)
        levels = list(range(2, L + 1))
        flags = {level: (src[level] > 0).reshape(-1, 8) for level in levels}
        if capacity is None:
            active = xp.stack([flags[level].sum(axis=0) for level in levels])
            active = active.get()                                  # (levels, 8), one transfer
        else:
            active = np.asarray(capacity, dtype=np.int64).reshape(len(levels), 8)
        out = {}
        for row, level in enumerate(levels):
            B = 8 ** level
            if prepared is not None and level in prepared:
                layout, tables = prepared[level] or (None, None)
            else:
                # the stream is idle after the transfer above (or a test's call):
                # host-to-device copies cost no stall here
                layout = self._sparse_layout(L, level, P, active[row], None if counts is None
                                             else int(counts[row].sum()))
                tables = None if layout is None else tuple(xp.asarray(a)
                                                           for a in layout["tables"])
            if layout is None:
                out[level] = None
                continue
            rows, start = layout["rows"], layout["start"]
            d_base, d_rows, d_first, d_spare = tables
            yinfo = (layout["unified"], layout["y_size"], d_base)
            f = flags[level]
            pos = xp.cumsum(f, axis=0) - 1                         # column within the class
            if capacity is None:
                colmap = xp.where(f, pos, -1).reshape(B)
                buf = xp.empty(int(start[-1]), dtype=xp.int64)
            else:
                fit = f & (pos < d_rows)
                colmap = xp.where(fit, pos, xp.where(f, -2, -1)).reshape(B)
                f = fit
                buf = xp.zeros(int(start[-1]), dtype=xp.int64)    # spare rows: box 0
            slot = xp.where(f, d_first + pos, d_spare)
            buf[slot.reshape(B)] = xp.arange(B, dtype=xp.int64)
            classes = [(int(rows[p]), buf[start[p]:start[p] + rows[p]]) for p in range(8)]
            out[level] = (classes, colmap, tgt[level], yinfo)
        return out

    def _sparse_layout(self, L, level, P, rows, n_box=None):
        """Host layout of one level's sparse M2L, or None where the dense M2L is used.

        rows (8,): GEMM rows per parity class (the non-empty source boxes, or a plan's
        capacities); n_box: the non-empty boxes that decide sparse or dense (default:
        the rows' sum).  Returns a dict: ``unified`` (one GEMM against all 343 cores, or
        one per class), ``y_size`` (elements of the GEMM output), ``rows`` (8,),
        ``start`` (9,) (list slots, one spare per class) and ``tables``, the int64
        arrays the device needs: (2, 8) output bases and strides, (8,) rows, (8,) first
        slots, (8,) spare slots.
        """
        B = 8 ** level
        r = (P + 1) ** 2
        mdt = self._m2l_dtype()
        item = np.dtype(mdt).itemsize
        sep = self._sep(level, L)
        widths = np.array([k.shape[1] for k in self._sparse_m2l_tables(P, sep, mdt)["Kt"]],
                          dtype=np.int64)
        rows = np.asarray(rows, dtype=np.int64)
        n_tot = int(rows.sum())
        # dense where most boxes hold sources; small levels (sparse GEMM output ≤ 1 GB)
        # up to 90 %: their dense per-class GEMMs have only 3·B/8 columns (leapfrog,
        # 56 % active: 1.35 vs 0.8 ms at level 2 on the H100, 2.7 vs 1.0 at level 3)
        small = 3 * n_tot * int(widths[0]) * item <= 1 << 30
        n_box = n_tot if n_box is None else n_box
        limit = min(0.9, 1.8 * self.SPARSE_M2L_FRACTION) if small \
            else self.SPARSE_M2L_FRACTION
        if n_box >= limit * B:
            return None
        # one GEMM against all 343 cores (read once) or one per source class (189
        # cores each, read 8 times): modelled time = flops / 25 TF/s + bytes / 2.5 TB/s
        w0 = int(widths[0])
        cost_cls = (6 * n_tot * r * w0 / 2.5e13
                    + (8 * w0 * r + 6 * n_tot * w0) * item / 2.5e12)
        cost_all = (6 * n_tot * r * 343 * r / 2.5e13
                    + (343 * r * r + 6 * n_tot * 343 * r) * item / 2.5e12)
        unified = cost_all < cost_cls and 3 * n_tot * 343 * r * item <= 1 << 30
        if self.SPARSE_M2L_UNIFIED is not None:               # tests force either variant
            unified = bool(self.SPARSE_M2L_UNIFIED)
        ystride = np.full(8, 343 * r, dtype=np.int64) if unified else widths
        ybase = np.concatenate([[0], np.cumsum(3 * rows * ystride)[:-1]])
        start = np.concatenate([[0], np.cumsum(rows + 1)])    # one spare slot per class
        return {"unified": unified, "y_size": int(3 * (rows * ystride).sum()),
                "rows": rows, "start": start,
                "tables": (np.stack([ybase, ystride]).astype(np.int64), rows.copy(),
                           start[:8].astype(np.int64), (start[1:] - 1).astype(np.int64))}

    def _m2l_dtype(self):
        """dtype of the 1/r M2L GEMMs: float32 in float32 runs with tol ≥ 1e-5
        (normalized expansions are O(1), so float32 rounding stays far below tol)."""
        return np.float32 if self.dtype == np.float32 and self.tol >= 1e-5 else np.float64

    def _m2l_sparse(self, tree, level, sep, Mt, P, info, mdt=np.float64):
        """Compressed locals Lt (r, B, 3) from the non-empty source boxes only (GPU).

        Per source class c one GEMM Y_c = Mt[:, active_c]ᵀ · [C_oᵀ]_{o ∈ O'_c} (O'_c: the
        offsets d for which a box of class c is the source s = t + d of an interacting
        target t), then ``m2l_gather_sum`` sums each target's blocks.  Same operators and
        result as the dense path up to round-off; used where most boxes are empty.
        """
        import cupy as cp  # noqa: PLC0415
        from ..kernels.modules import get_function  # noqa: PLC0415
        classes, colmap, tgt_cnt, (unified, y_size, ybs) = info
        r, B = Mt.shape[0], Mt.shape[1]
        tables = self._sparse_m2l_tables(P, sep, mdt)
        if unified:
            # few active boxes: one GEMM against all 343 cores, read once
            lst = cp.concatenate([lst for _, lst in classes])
            A = Mt[:, lst, :].transpose(1, 2, 0).reshape(-1, r).astype(mdt)
            Y = A @ tables["Kt_all"]
            qcls, qidx = tables["q_all_raw"]
        else:
            Y = cp.empty(max(y_size, 1), dtype=mdt)
            pos = 0
            for c, (n_c, lst) in enumerate(classes):
                if n_c:
                    A = Mt[:, lst, :].transpose(1, 2, 0).reshape(3 * n_c, r).astype(mdt)
                    size = 3 * n_c * tables["Kt"][c].shape[1]
                    cp.matmul(A, tables["Kt"][c], out=Y[pos:pos + size].reshape(3 * n_c, -1))
                    pos += size
            qcls, qidx = tables["q_all"]
        ybase, ystride = ybs[0], ybs[1]
        Lt = cp.empty((r, B, 3))
        fn = get_function("fmm.cu", f"m2l_gather_sum<{'float' if mdt == np.float32 else 'double'}>")
        gather = self._cached(("m2l_gather_all", level, sep), lambda: cp.ascontiguousarray(
            cp.stack([g for _, g in self._m2l_classes(level, sep)])))
        # threads: r split evenly over ceil(r / 256) passes, rounded up to whole warps
        passes = -(-r // 256)
        threads = 32 * -(-(-(-r // passes)) // 32)
        fn((B,), (threads,),
           (Y, ybase, ystride, gather, qcls, qidx, np.int32(gather.shape[2]), colmap, tgt_cnt,
            np.int32(r), np.int64(B), tables["Kt_all"], Mt, tables["q_all_raw"][1], Lt))
        return Lt

    def _sparse_m2l_tables(self, P, sep, mdt=np.float64):
        """Cached tables of the sparse M2L: per source class c the stacked transposed cores
        Kt_c (r, |O'_c| r), and per target class p, for each of its offsets q, the source
        class and row block (int32 arrays)."""
        def build():
            xp = self.device.xp
            K = E.unit_m2l_cores(P, 3)
            r = K.shape[0]
            bits = np.array([[p & 1, (p >> 1) & 1, (p >> 2) & 1] for p in range(8)])
            offidx = -np.ones((8, len(_OFFSETS_3)), dtype=np.int64)
            Kt = []
            for c in range(8):
                tpar = (bits[c][None, :] - _OFFSETS_3) % 2         # the targets' parity
                ok = np.nonzero(_interacts(tpar, _OFFSETS_3, sep))[0]
                offidx[c, ok] = np.arange(len(ok))
                Kt.append(xp.asarray(np.concatenate(
                    [K[:, o * r:(o + 1) * r].T for o in ok], axis=1), dtype=mdt))
            q = []
            for p in range(8):
                offsets = np.nonzero(_interacts(bits[p], _OFFSETS_3, sep))[0]
                cls = ((bits[p][None, :] + _OFFSETS_3[offsets]) % 2) @ np.array([1, 2, 4])
                idx = offidx[cls, offsets]
                assert (idx >= 0).all()
                q.append((cls.astype(np.int32), idx.astype(np.int32)))
            # every class has as many offsets (parity reflections map them one to one)
            q_all = tuple(xp.asarray(np.stack([t[i] for t in q])) for i in (0, 1))
            # the unified variant: row block = the offset's index in OFFSETS_3
            raw = np.stack([np.nonzero(_interacts(bits[p], _OFFSETS_3, sep))[0]
                            for p in range(8)]).astype(np.int32)
            # C order: m2l_gather_sum's overflow path indexes it (np.concatenate of
            # transposed blocks would keep their Fortran order)
            Kt_all = xp.ascontiguousarray(xp.asarray(np.concatenate(
                [K[:, o * r:(o + 1) * r].T for o in range(len(_OFFSETS_3))], axis=1), dtype=mdt))
            return {"Kt": Kt, "q_all": q_all, "Kt_all": Kt_all,
                    "q_all_raw": (q_all[0], xp.asarray(raw))}
        return self._cached(("sparse_m2l", P, sep, np.dtype(mdt).name), build)

    def _downward(self, tree, locals_, parts, P, clock, harmonic=False):
        """L2L to the leaves, then L2P added into each target part's u, g (sorted targets).

        ``locals_``: :meth:`_m2l`'s normalized locals, compressed (r, 8^level, 3) with
        ``harmonic`` (1/r far field), else L̃ (8^level, n, 3).
        ``tree`` holds the union of the parts' targets (its ``tgt_start`` only marks
        which leaves need coefficients); each :class:`_TargetPart` has its own tree."""
        L = tree.depth
        n = E.multi_indices(P).n
        if harmonic:
            # compressed locals L̂ (r, 8^level, 3): L2L at r² per child, then L̃ = U L̂
            _, Rc = self._compressed_shift_operators(P)
            r = Rc.shape[1]
            for level in range(3, L + 1):
                bp = 8 ** (level - 1)
                Y = Rc @ locals_[level - 1].reshape(r, bp * 3)     # (8r, bp·3)
                locals_[level] += Y.reshape(8, r, bp, 3).transpose(1, 2, 0, 3) \
                    .reshape(r, 8 * bp, 3)
            Ll = self._decompressed(locals_[L], P)
        else:
            _, R = self._shift_operators(P)
            for level in range(3, L + 1):                          # L2L: one GEMM per level
                bp = 8 ** (level - 1)
                Y = (R @ locals_[level - 1].transpose(1, 0, 2).reshape(n, bp * 3))
                locals_[level] += Y.reshape(8, n, bp, 3).transpose(2, 0, 1, 3) \
                    .reshape(8 * bp, n, 3)
            Ll = locals_[L]
        clock.lap("l2l")
        self._l2p(Ll, self._box_centers(tree, L), float(tree.box_width(L)), tree.tgt_start,
                  parts, P)
        clock.lap("l2p")

    def _l2p(self, Ll, centres, w, tgt_start, parts, P):
        """L2P: the locals L̃ (B, n, 3) of B leaves (centres (B, 3), edge w [L]) added
        into each target part's u, g; ``tgt_start`` (B + 1,): the union of the parts'
        targets per leaf (leaves without targets are skipped); each part's tree holds
        its own CSR over the same B leaves."""
        xp = self.device.xp
        n = Ll.shape[1]
        if self.device.is_gpu:
            from ..kernels.modules import get_function  # noqa: PLC0415
            idx, fu, fg = self._cached(("l2p_tables", P), lambda: tuple(
                xp.asarray(a) for a in _l2p_coefficient_tables(P)))
            B, n_out = Ll.shape[0], idx.shape[1]
            C = xp.empty((B, n_out))
            get_function("fmm.cu", "l2p_coefficients")(
                ((B * n_out + 255) // 256,), (256,),
                (Ll, idx, fu, fg, np.float64(1.0 / w), np.int32(n * 3), np.int32(n_out),
                 np.int64(B), tgt_start, C))
            centres = xp.ascontiguousarray(centres)
            for part in parts:
                m = part.ys.shape[0]
                block = self._block_for(m, part.occupied or B)
                chunk_start, grid = _chunk_starts(part.tree, block, m)
                get_function("fmm.cu", f"l2p_targets_tiled<{P},"
                             f"{'true' if part.grad else 'false'},{block},64>")(
                    (grid,), (block,),
                    (C, centres, np.float64(1.0 / w), part.tree.tgt_start, chunk_start,
                     np.int32(B), part.ys, part.u,
                     part.g if part.grad else part.u))
            return
        for part in parts:
            ts, ys = part.tree.tgt_start, part.ys
            for box in np.nonzero(ts[1:] > ts[:-1])[0]:            # two GEMMs per leaf
                t0, t1 = ts[box], ts[box + 1]
                uc, gc = E.l2p_box(Ll[box], (ys[t0:t1] - centres[box]) / w, P, np,
                                   gradient=part.grad)
                part.u[t0:t1] += uc / w
                if part.grad:
                    part.g[t0:t1] += gc / (w * w)

    @staticmethod
    def _near_block_for(n_points, n_leaves):
        """Threads per block of the near-field kernel (one block per chunk of a leaf's
        targets): 32 up to a mean of 32 targets per leaf, 64 up to 256, else 128
        (:meth:`_block_for` had 128 from 64 up).
        A/B on the H100 (session 7, benchmarks/ab_near_block.py): 64 instead of 128
        took the near field of uniform 2^20 (mean 256) from 36.0 to 32.4 ms (float32
        14.4 → 11.6) and of the clustered adaptive levels (means 71-133) from 46.7 to
        44.3 ms; rings with tracers (L2P too at 64) 13.8 → 16.0 ms, so L2P keeps
        :meth:`_block_for`."""
        mean = n_points / max(n_leaves, 1)
        return 32 if mean <= 32 else 64 if mean <= 256 else 128

    @staticmethod
    def _block_for(n_points, n_leaves):
        """Threads per block for kernels with one block per leaf: ~ the mean leaf size."""
        mean = n_points / max(n_leaves, 1)
        return 32 if mean <= 32 else 64 if mean <= 64 else 128

    #: cost model of :meth:`_cheapest_depth`: near-field pairs per second and M2L flops
    #: per second, per device kind and precision (H100 and the 2-core CI machine,
    #: measured 2026-11-22 with benchmarks/bench_fmm.py and the CPU tests).
    #: The third number is the fixed cost [s] of one (target leaf, stencil box) visit of
    #: the near field (GPU: 19 ns, from 32-point leaves at depth 5 running at 4.7e10
    #: pairs/s instead of 3.5e11).
    COST_RATES = {("gpu", "float64"): (1.1e11, 2.0e13, 1.9e-8),
                  ("gpu", "float32"): (3.5e11, 1.5e13, 1.9e-8),
                  ("cpu", "float64"): (2.0e7, 3.0e10, 2e-6),
                  ("cpu", "float32"): (2.0e7, 3.0e10, 2e-6)}

    def _cheapest_depth(self, pairs, green):
        """Leaf level with the least modelled cost, given the near-field pair counts.

        ``pairs[L]`` (L = 0..depth_max) is the number of near-field pairs of a tree of
        depth L for the actual points (:func:`_near_pairs_by_depth`); the cost is
        near(L) = pairs[L] at the device's pair rate + 8^L (2r+1)³ leaf visits, plus
        far(L) = Σ_{l=2..L} 8^l × 189 M2L box pairs (875 with the wide separation) × 6 c²
        flops at its GEMM rate, with
        c = (P+1)² for the compressed 1/r far field and c = n(P) for the regularized one
        (the level-uniform tree translates empty boxes too).  P2M and L2P cost the same
        at every depth and are left out.  Ties go to the deeper tree.
        """
        near_rate, gemm_rate, visit = self.COST_RATES[(self.device.kind, self.dtype.name)]
        stencil = (2 * self.near_radius + 1) ** 3
        c = (self.order + 1) ** 2 if green.harmonic else E.multi_indices(self.order).n
        best, best_cost = 0, math.inf
        for depth, npairs in enumerate(pairs):
            far = (sum(8.0 ** level for level in range(2, depth + 1)) * self._list_length
                   * 6 * c * c / gemm_rate)
            cost = float(npairs) / near_rate + 8.0 ** depth * stencil * visit + far
            if cost <= best_cost:
                best, best_cost = depth, cost
        return best

    def _max_depth(self, order):
        """Deepest leaf level whose expansion arrays fit ``memory_budget`` bytes.

        Multipoles and locals of the leaf level, their compressed copies and one level
        above take about 6 × 8^L × n(P) × 3 × 8 bytes; beyond that budget leaves get
        fuller instead (more near-field work, same accuracy).
        """
        per_box = 6 * E.multi_indices(order).n * 3 * 8
        depth = 0
        while depth < 8 and 8 ** (depth + 1) * per_box <= self.memory_budget:
            depth += 1
        return depth

    def _box_centers(self, tree, level):
        """``tree.box_centers(level)`` from cached integer cell coordinates (no decode)."""
        xp = self.device.xp
        ijk = self._cached(("ijk", level), lambda: xp.asarray(np.stack(
            morton_decode(np.arange(8 ** level, dtype=np.uint64), level, np), axis=1) + 0.5))
        return tree.lo + ijk * tree.box_width(level)

    def _cached(self, key, build):
        key = key + (self.device.kind,)
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]


@dataclasses.dataclass(eq=False)
class _TargetPart:
    """One target set of an evaluation: its tree (own leaf order and CSR offsets), the
    index of its first target in the caller's array, its sorted points ys (m, 3),
    whether it needs ∇u, and its sorted results u (m, 3), g (m, 3, 3) or None."""

    tree: object
    first: int
    ys: object
    grad: bool
    u: object = None
    g: object = None
    occupied: object = None          # leaves holding its targets, when known (host int)


def _gradient_count(gradient, m, exclude_self):
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
    :class:`vortexsim.rhs.Summation`, whose direct sum and step plan split the same way)."""
    m = targets.shape[0]
    k = _gradient_count(gradient, m, False)
    if k in (0, m):                       # one set (gradient=True keeps ∇u even if M = 0)
        as_bool = isinstance(gradient, (bool, np.bool_)) and bool(gradient)
        return [(0, targets, as_bool or k > 0)]
    return [(0, targets[:k], True), (k, targets[k:], False)]


class _Clock:
    """Stage timer; synchronizes the GPU at each lap only when asked (profiling)."""

    def __init__(self, xp, sync):
        self.xp, self.sync = xp, sync
        self.t0 = self.last = time.perf_counter()
        self.laps = {}

    def lap(self, name):
        if self.sync:
            self.xp.cuda.get_current_stream().synchronize()
        now = time.perf_counter()
        self.laps[name] = now - self.last
        self.last = now

    def finish(self):
        self.laps["total"] = self.last - self.t0
        return self.laps


def _memory_budget(device):
    """A quarter of the device's (GPU) or host's (CPU) memory, in bytes."""
    if device.is_gpu:
        import cupy as cp  # noqa: PLC0415
        return 0.25 * cp.cuda.runtime.memGetInfo()[1]
    try:
        return 0.25 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4.0 * 2**30


def _stretched_width(width, depth, min_leaf):
    """Root-cube edge [L]: ``width``, stretched where needed so that the leaves of a
    tree of ``depth`` levels are no narrower than ``min_leaf`` (the near field's
    reach over its stencil radius)."""
    return max(width, (1 << depth) * min_leaf * (1 + 1e-9))


@functools.lru_cache(maxsize=None)
def _gather_kernel():
    """CuPy kernel of :func:`_gather_columns` (one thread per (k, o, j), 3 values each)."""
    import cupy as cp  # noqa: PLC0415
    return cp.ElementwiseKernel(
        "raw T M, raw int64 g, int32 ns, int32 nj, int64 S1", "raw T X",
        """
        const unsigned int t = (unsigned int) i;
        const unsigned int j = t % (unsigned int) nj;
        const unsigned int q = t / (unsigned int) nj;
        const unsigned int o = q % (unsigned int) ns;
        const unsigned int k = q / (unsigned int) ns;
        const long long s = g[(long long) o * nj + j];
        const T* src = &M[((long long) k * S1 + s) * 3];
        T* dst = &X[(long long) t * 3];
        dst[0] = src[0]; dst[1] = src[1]; dst[2] = src[2];
        """, "vortexsim_m2l_gather")


def _gather_columns(Mcm, g):
    """X (r, ns, nj, 3) with X[k, o, j, :] = Mcm[k, g[o, j], :] (GPU): the M2L GEMM's
    right-hand side, gathered with contiguous 3-vectors (``Mcm[:, g, :]`` through
    ``cupy.take`` reached ~0.65 TB/s on the H100 and took 22 of the ~113 GPU ms of the
    2^20-point clustered case, session 7)."""
    import cupy as cp  # noqa: PLC0415
    r, S1 = Mcm.shape[0], Mcm.shape[1]
    gT = cp.ascontiguousarray(g)
    ns, nj = gT.shape
    X = cp.empty((r, ns, nj, 3), Mcm.dtype)
    size = r * ns * nj
    if size >= 1 << 32:
        raise ValueError(f"M2L gather of {size} vectors exceeds the kernel's 32-bit index; "
                         "lower FMM._chunk_bytes.")
    if size:
        _gather_kernel()(cp.ascontiguousarray(Mcm), gT, np.int32(ns), np.int32(nj),
                         np.int64(S1), X, size=size)
    return X


def _interacts(parity, d, sep, parent_radius=1):
    """M2L rule: a box of ``parity`` (…, 3) takes the box at offset ``d`` (…, 3) when their
    parents are within ``parent_radius`` boxes of each other (parity + d ∈ [−2ρ, 2ρ + 1]
    per axis) and it lies outside the near stencil (max |d| ≥ ``sep``)."""
    rho = parent_radius
    return (np.all((parity + d >= -2 * rho) & (parity + d <= 2 * rho + 1), axis=-1)
            & (np.abs(d).max(axis=-1) >= sep))


def _class_cores(K, offsets):
    """Columns of the unit cores K (r, 343 r) for ``offsets``, k-major: (r, r · |offsets|)."""
    r = K.shape[0]
    Kc = K.reshape(r, -1, r)[:, offsets, :]                   # (r, |O|, r): [row, q, k]
    return np.ascontiguousarray(Kc.transpose(0, 2, 1).reshape(r, r * len(offsets)))


def _apply(A, X, xp):
    """A (n, n) applied to every box: X (B, n, 3) → (B, n, 3), as one GEMM."""
    B, n, _ = X.shape
    Y = A @ X.transpose(1, 0, 2).reshape(n, B * 3)
    return Y.reshape(A.shape[0], B, 3).transpose(1, 0, 2)


def _near_pairs_by_depth(x, y, lo, width, depth_max, radius, xp):
    """Near-field pair counts and occupied target leaves, each (depth_max + 1,), of
    level-uniform trees of depth 0..depth_max.

    Sources x (N, 3) and targets y (M, 3) are histogrammed on the 2^depth_max grid of
    the cube (lo, width); coarser grids sum 2×2×2 blocks.  At each depth the count is
    Σ_leaf targets(leaf) × sources in its (2r+1)³ stencil (a box filter of the source
    grid).  Memory O(N + M + 8^depth_max); one host transfer for the result.
    """
    n_side = 1 << depth_max

    def grid(points):
        cell = grid_cells(points, lo, width, depth_max, xp)
        flat = (cell[:, 0] * n_side + cell[:, 1]) * n_side + cell[:, 2]
        return xp.bincount(flat, minlength=n_side ** 3).reshape((n_side,) * 3)

    same = y is x
    cs = grid(x)
    ct = cs if same else grid(y)
    if xp is not np:
        return _near_pairs_by_depth_cuda(cs, ct, same, depth_max, radius)
    cs = cs.astype(np.float64)
    ct = cs if same else ct.astype(np.float64)
    counts, occupied = [], []
    width_stencil = 2 * radius + 1
    for depth in range(depth_max, -1, -1):
        side = cs.shape[0]
        box = xp.pad(cs, radius)
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
    out = xp.stack([xp.stack(counts[::-1]), xp.stack(occupied[::-1]).astype(xp.float64)])
    out = out.get() if hasattr(out, "get") else out
    return out[0], out[1]


def _near_pairs_by_depth_cuda(cs, ct, same, depth_max, radius):
    """GPU part of :func:`_near_pairs_by_depth`: one counting kernel per depth on the
    integer grids cs, ct (2^depth_max)³, coarsened by 2×2×2 sums; one host transfer."""
    import cupy as cp  # noqa: PLC0415
    from ..kernels.modules import get_function  # noqa: PLC0415
    fn = get_function("fmm.cu", "stencil_pair_count")
    out = cp.zeros((depth_max + 1, 2), cp.uint64)
    cs = cs.astype(cp.int64, copy=False)
    ct = cs if same else ct.astype(cp.int64, copy=False)
    for depth in range(depth_max, -1, -1):
        side = cs.shape[0]
        fn((-(-side ** 3 // 256),), (256,), (cs, ct, np.int32(side),
                                             np.int32(radius), out[depth]))
        if depth:
            h = side // 2
            cs = cs.reshape(h, 2, h, 2, h, 2).sum(axis=(1, 3, 5))
            ct = cs if same else ct.reshape(h, 2, h, 2, h, 2).sum(axis=(1, 3, 5))
    out = out.get().astype(np.float64)
    return out[:, 0], out[:, 1]


def _chunk_starts(tree, block, m):
    """Blocks of ``block`` targets of one leaf each (GPU kernels over crowded leaves):
    chunk_start (n_leaves + 1,) int64, the first block of each leaf, and the grid size,
    bounded by n_leaves + m / block without a host transfer (spare blocks return)."""
    import cupy as cp  # noqa: PLC0415
    chunks = (cp.diff(tree.tgt_start) + (block - 1)) // block
    chunk_start = cp.concatenate([cp.zeros(1, cp.int64), cp.cumsum(chunks)])
    return chunk_start, tree.n_leaves + -(-m // block)


def _l2p_coefficient_tables(order):
    """Gather tables of the GPU L2P: per-leaf coefficients C from normalized locals L̃.

    For the n1 = n(order − 1) monomials ĥ^j, row j of C holds 12 values: the
    coefficients of u_a (a = 0..2) and of ∂_d u_a (3a + d, zero at degree order − 1),
    each the sum of two terms ± f · L̃[k, c] (from u_a = ε_abc ∂_b ψ_c / 4π):

        u_a[j]     = Σ_bc ε_abc (j_b + 1) L̃[j + e_b, c] / (4π w)
        ∂_d u_a[j] = Σ_bc ε_abc (j_d + 1)((j + e_d)_b + 1) L̃[j + e_d + e_b, c] / (4π w²)

    Returns idx (2, n1·12) int64 into L̃ flattened as (n·3), and fu, fg (2, n1·12):
    the factors are fu / w + fg / w² (fu holds the u rows, fg the ∂u rows).  Rows (j)
    come in the order of the kernel loops, :func:`_l2p_loop_order` (l2p_targets_tiled
    stages contiguous ranges of rows).
    """
    mi = E.multi_indices(order)
    m1 = E.multi_indices(max(order - 1, 0))
    n1 = m1.n
    idx = np.zeros((2, n1, 12), dtype=np.int64)
    fu = np.zeros((2, n1, 12))
    fg = np.zeros((2, n1, 12))
    terms = {0: ((1, 2, 1.0), (2, 1, -1.0)), 1: ((2, 0, 1.0), (0, 2, -1.0)),
             2: ((0, 1, 1.0), (1, 0, -1.0))}
    eye = np.eye(3, dtype=np.int64)
    for j, kj in enumerate(m1.k):
        deg = int(kj.sum())
        for a in range(3):
            for t, (b, c, sign) in enumerate(terms[a]):
                kk = kj + eye[b]
                idx[t, j, a] = mi.index[kk[0], kk[1], kk[2]] * 3 + c
                fu[t, j, a] = sign * (kj[b] + 1) * E.INV_4PI
                if deg <= order - 2:
                    for d in range(3):
                        kd = kj + eye[d]
                        k2 = kd + eye[b]
                        idx[t, j, 3 + 3 * a + d] = mi.index[k2[0], k2[1], k2[2]] * 3 + c
                        fg[t, j, 3 + 3 * a + d] = sign * (kj[d] + 1) * (kd[b] + 1) * E.INV_4PI
    perm = _l2p_loop_order(order)
    return (idx[:, perm].reshape(2, -1), fu[:, perm].reshape(2, -1),
            fg[:, perm].reshape(2, -1))


def _l2p_loop_order(order):
    """Indices (n1,) into multi_indices(order − 1) in the order of the L2P kernel loops
    (kx = 0..D, ky = 0..D − kx, kz = 0..D − kx − ky; D = order − 1)."""
    m1 = E.multi_indices(max(order - 1, 0))
    top = max(order - 1, 0)
    return np.array([m1.index[kx, ky, kz] for kx in range(top + 1)
                     for ky in range(top + 1 - kx) for kz in range(top + 1 - kx - ky)])


_OFFSETS_3 = E.OFFSETS_3


@functools.lru_cache(maxsize=4)
def _shift_operators_host(P):
    """NumPy T (n, 8n) and R (8n, n) of :meth:`FMM._shift_operators`."""
    mi = E.multi_indices(P)
    half = 2.0 ** -mi.k.sum(axis=1).astype(np.float64)
    S = E.shift_matrices(_child_offsets(1.0), P, np, "m2m")
    R = E.shift_matrices(_child_offsets(1.0), P, np, "l2l")
    T = np.concatenate([half[:, None] * S[c] for c in range(8)], axis=1)
    Rc = np.concatenate([R[c] * half[None, :] for c in range(8)], axis=0)
    return T, Rc


def _child_offsets(child_width):
    """Offsets (8, 3) of the 8 child centres from their parent centre (Morton child order)."""
    c = np.arange(8)
    bits = np.stack([c & 1, (c >> 1) & 1, (c >> 2) & 1], axis=1)
    return (bits - 0.5) * float(child_width)
