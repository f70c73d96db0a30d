r"""Near field: direct pair sums with the regularized kernel over each leaf's stencil.

Every pair closer than the near field's ``reach`` [L] is summed here, exactly (the
expansions represent the singular kernel, docs/fmm-design.md): ρ*(tol)·σ_max for the
Gaussian (where 1 − q and 1 − f/3 < tol/10), σ_max for ``polynomial``, 0 for the
others.  A leaf's targets meet the sources of the (2r+1)³ leaves around it.

:class:`NearField` is the NumPy implementation (the specification);
:class:`vortexsim.fmm.cuda.CudaNearField` runs the same sums in ``p2p_near``
(``kernels/cuda/fmm.cu``).
"""
from __future__ import annotations

import concurrent.futures
import functools
import math

import numpy as np

from ..backend.threads import cpu_threads
from ..kernels.cutoff import blob_pair_factors, get_kernel
from ..kernels.direct import INV_4PI, accumulate_block, skew
from .tree import neighbor_table

__all__ = ["NearField", "SerialLanes", "near_field_reach", "gaussian_rho_star",
           "gaussian_field_rho", "half_stencil", "TABLE_CUT_MAX"]

#: s = (r/σ)² beyond which the near field always uses the singular pair factors (the
#: end of the Gaussian cutoff table)
TABLE_CUT_MAX = 81.0


@functools.lru_cache(maxsize=64)
def gaussian_rho_star(tol: float) -> float:
    """Smallest ρ = r/σ beyond which 1 − q < tol/10 and 1 − f/3 < tol/10 (Gaussian)."""
    k = get_kernel("gaussian")
    rho = np.linspace(0.5, 12.0, 23001)
    bad = (1.0 - k.q(rho, np) >= tol / 10) | (1.0 - k.f(rho, np) / 3.0 >= tol / 10)
    return float(rho[np.nonzero(bad)[0][-1] + 1])


@functools.lru_cache(maxsize=64)
def gaussian_field_rho(tol):
    """ρ_f(tol): beyond it 1 − ρ g(ρ) = erfc(ρ/√2) < tol/10 and ζ(ρ)/ζ(0) = e^{−ρ²/2}
    < tol/10 (Gaussian; the relative error of the far field's factors 1/r and 0 for one
    pair; 5.82 at tol = 1e-6)."""
    from scipy.special import erfcinv  # noqa: PLC0415 - 0.2-0.5 s of every command's start
    return max(math.sqrt(2.0) * float(erfcinv(tol / 10)), math.sqrt(2.0 * math.log(10.0 / tol)))


def near_field_reach(kernel_name: str, tol: float, sigma_max: float) -> float:
    """Distance [L] below which pairs must be summed directly (see the module docstring);
    ``sigma_max``: the largest core radius [L]."""
    if kernel_name == "gaussian":
        return gaussian_rho_star(tol) * sigma_max
    if kernel_name == "polynomial":
        return sigma_max
    return 0.0


def half_stencil(nbr):
    """The forward half of a stencil table (n, (2r+1)³) with the box itself first: its
    columns from the middle one on (the offsets from (0, 0, 0) on in lexicographic
    order; :func:`~vortexsim.fmm.tree.neighbor_table`).  Of two boxes in each other's
    stencils, exactly one holds the other in its forward half."""
    return nbr[:, nbr.shape[1] // 2:]


def for_each_block(tree, nbr, block):
    """``block(leaf, src, c0, c1)`` for the targets c0:c1 (sorted) of every leaf holding
    targets, in chunks of about 2^18 pairs against ``src`` (int array), the sources of the
    leaf's stencil ``nbr[leaf]`` (leaves whose stencil holds none are skipped): O(N + M)
    memory even when one leaf holds most points.  Leaves write disjoint target ranges:
    threads (NumPy releases the GIL) keep the result bitwise identical to a serial loop."""
    ss, ts = tree.src_start, tree.tgt_start

    def leaf_blocks(leaf):
        boxes = nbr[leaf][nbr[leaf] >= 0]
        if boxes.size == 0:
            return
        src = np.concatenate([np.arange(ss[b], ss[b + 1]) for b in boxes])
        if src.size == 0:
            return
        t0, t1 = int(ts[leaf]), int(ts[leaf + 1])
        step = max(1, (1 << 18) // src.size)
        for c0 in range(t0, t1, step):
            block(leaf, src, c0, min(t1, c0 + step))

    leaves = np.nonzero(ts[1:] > ts[:-1])[0]
    workers = min(len(leaves), cpu_threads())
    if workers > 1:
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(leaf_blocks, leaves))
    else:
        for leaf in leaves:
            leaf_blocks(leaf)


class SerialLanes:
    """Runs the near field of each target set in turn on the current stream (the CPU,
    and the GPU when profiling; the GPU's concurrent lanes: :class:`cuda.NearLanes`)."""

    concurrent = False

    def run(self, i, work):
        """``work()`` for target set ``i``; returns its result."""
        return work()

    def join(self):
        """Nothing to wait for."""


class NearField:
    """Near field of sorted targets, NumPy implementation.

    kernel: :class:`~vortexsim.kernels.cutoff.CutoffKernel`; dtype: precision of the pair
    sums (accumulators are float64); tol: the evaluator's tolerance (sets the Gaussian's
    table cut); radius: leaf-level stencil half-width r (boxes); cache: the evaluator's
    :class:`~vortexsim.fmm.operators.Cache`.
    """

    def __init__(self, kernel, dtype, tol, radius, cache):
        self.kernel = kernel
        self.dtype = dtype
        self.tol = tol
        self.radius = radius
        self.cache = cache

    def neighbors(self, depth):
        """The leaf level's stencil table (8^depth, (2r+1)³) on the host
        (:func:`~vortexsim.fmm.tree.neighbor_table`, cached)."""
        return self.cache.get(("nbr", depth, self.radius),
                              lambda: neighbor_table(depth, self.radius, np))

    def prepare(self, depth, symmetric=False):
        """Make the tables of a tree of ``depth`` levels (the half stencil's with
        ``symmetric``) before the near field forks onto concurrent streams (nothing to
        do on the CPU)."""

    def table_cut(self):
        """s = (r/σ)² from which the near field uses the singular pair factors:
        ρ*(tol)² for the Gaussian (beyond the reach 1 − q, 1 − f/3 < tol/10, as the far
        field assumes; the cutoff table is then read only within it), capped at
        :data:`TABLE_CUT_MAX`."""
        if self.kernel.name != "gaussian":
            return TABLE_CUT_MAX
        return min(TABLE_CUT_MAX, gaussian_rho_star(self.tol) ** 2)

    def __call__(self, tree, xs, alpha_s, sigma_s, ys, exclude_self, gradient, occupied=None,
                 uniform=False, nbr=None):
        """Near field u (M, 3) [L/T], ∇u (M, 3, 3) [1/T] (or None) of the sorted targets,
        float64 accumulators.

        tree: the leaves' CSR (``src_start``, ``tgt_start``, ``n_leaves``, ``depth``);
        xs, alpha_s (N, 3), sigma_s (N,): the sorted sources; ys (M, 3): the sorted
        targets.  ``occupied``: leaves holding targets, when known (GPU block sizing).
        ``uniform``: every σ is the same (GPU: source records without per-source
        parameters, bitwise the same result).  ``nbr``: the target leaves' stencils
        (n_leaves, (2r+1)³) as indices into ``tree.src_start`` (−1: none; the middle
        column is the leaf's own source box), on the evaluator's device; default the
        level-uniform :meth:`neighbors` of ``tree.depth``.  With ``exclude_self`` a
        leaf's targets are its own box's sources, in the same order."""
        if nbr is None:
            nbr = self.neighbors(tree.depth)
        own_col = nbr.shape[1] // 2
        m = ys.shape[0]
        u_s, w_s, g_s = np.zeros((m, 3)), np.zeros((m, 3)), np.zeros((m, 3, 3))
        ss, ts = tree.src_start, tree.tgt_start
        xs_, as_, sg_, ys_ = (a.astype(self.dtype) for a in (xs, alpha_s, sigma_s, ys))
        cut = self.table_cut() if self.kernel.name == "gaussian" else None

        def block(leaf, src, c0, c1):
            d = ys_[c0:c1, None, :] - xs_[None, src, :]
            mask = None
            if exclude_self:                # target t0 + q of the leaf: source ss[own] + q
                own = ss[nbr[leaf, own_col]] - ts[leaf]
                mask = (np.arange(c0, c1) + own)[:, None] == src[None, :]
            ub, wb, gb = (np.zeros_like(a[c0:c1], dtype=self.dtype) for a in (u_s, w_s, g_s))
            accumulate_block(self.kernel, d, as_[src], sg_[src], mask, gradient, ub, wb, gb,
                             singular_from=cut)
            u_s[c0:c1], w_s[c0:c1], g_s[c0:c1] = ub, wb, gb

        for_each_block(tree, nbr, block)
        return INV_4PI * u_s, (INV_4PI * (skew(w_s) - g_s) if gradient else None)

    def field_cut(self):
        """ρ² = r²/σ_tq² from which :meth:`fields` uses the far field's pair factors
        (Gaussian: ρ_f(tol)², :func:`gaussian_field_rho`; None for
        the other kernels, whose factors are summed as they are)."""
        if self.kernel.name != "gaussian":
            return None
        return gaussian_field_rho(self.tol) ** 2

    def fields(self, tree, xs, alpha_s, sigma_s, ys, sigma_t, nbr=None, occupied=None,
               uniform=False, symmetric=False):
        """Near field of the diagnostics' fields at the sorted targets ys (M, 3) [L] with
        core radii sigma_t (M,) [L], float64 (:mod:`vortexsim.fmm.fields`):

            u (M, 3) [L/T]      (1/4π) Σ_q A(r, σ_q) α_q × d   (as :meth:`__call__`)
            ψ (M, 3) [L²/T]     (1/4π) Σ_q g(r/σ_tq)/σ_tq α_q
            ω (M, 3) [1/T]      Σ_q ζ(r/σ_tq)/σ_tq³ α_q        (0 without ζ)

        over every pair of each leaf's stencil, self pairs included, σ_tq² = σ_t² + σ_q²
        (:func:`~vortexsim.kernels.cutoff.blob_pair_factors`).  Other arguments as
        :meth:`__call__` (``occupied``, ``uniform``: GPU block sizing and records).

        ``symmetric``: the targets are the sources (same order, same cores) and σ is
        uniform, so every pair's three terms dotted with α are symmetric in the pair
        (the helicity's triple product too).  Each leaf then meets its own sources and,
        with weight 2, those of the forward half of its stencil (the offsets after its
        own in the table's lexicographic order): half the pairs.  The results are then
        shares, not fields: only Σ_t α_t·u_t, Σ_t α_t·ψ_t and Σ_t α_t·ω_t are those of
        the whole stencil."""
        if nbr is None:
            nbr = self.neighbors(tree.depth)
        if symmetric:
            nbr = half_stencil(nbr)
        m = ys.shape[0]
        u, psi, omega = np.zeros((m, 3)), np.zeros((m, 3)), np.zeros((m, 3))
        cut = self.table_cut() if self.kernel.name == "gaussian" else None
        field_cut = self.field_cut()

        def block(leaf, src, c0, c1):
            d = ys[c0:c1, None, :] - xs[None, src, :]
            a = alpha_s[src]
            if symmetric:                  # the own leaf's sources come first (column 0)
                a = a.copy()
                a[int(tree.src_start[leaf + 1] - tree.src_start[leaf]):] *= 2.0
            ub = np.zeros((c1 - c0, 3))
            accumulate_block(self.kernel, d, a, sigma_s[src], None, False, ub, None,
                             None, singular_from=cut)
            e, z = blob_pair_factors(self.kernel, np.einsum("tsk,tsk->ts", d, d),
                                     sigma_t[c0:c1, None] ** 2 + sigma_s[src][None, :] ** 2,
                                     far_from=field_cut)
            u[c0:c1], psi[c0:c1] = ub, e @ a
            if z is not None:
                omega[c0:c1] = z @ a

        for_each_block(tree, nbr, block)
        return INV_4PI * u, INV_4PI * psi, omega
