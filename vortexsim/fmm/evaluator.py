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

This version runs the whole algorithm in NumPy (``device="cpu"``); the GPU
pipeline is tracked in issue 3.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time

import numpy as np

from ..kernels.cutoff import get_kernel
from ..kernels.direct import INV_4PI, _accumulate_block, skew
from . import expansions as E
from .tree import build_tree, choose_depth, morton_decode, neighbor_table

logger = logging.getLogger(__name__)

__all__ = ["FMM", "FMMConfig", "order_for_tol", "near_field_reach"]

#: expansion order P for a tolerance: the smallest P whose measured errors on
#: uniform inputs (σ = h, N = 4000, benchmarks/calibrate_fmm.py, worst of singular,
#: algebraic, winckelmans) are err_u ≤ tol/2 and err_∇u ≤ 5·tol; see docs/fmm-design.md.
#: Below 1e-6 the full Cartesian M2L (O(P⁶)) is too costly: those tolerances wait for
#: the next far-field operator.
_ORDER_TABLE = ((1e-2, 4), (1e-3, 8), (1e-4, 10), (1e-5, 14), (1e-6, 16))


def order_for_tol(tol: float) -> int:
    """Expansion order P for a relative tolerance ``tol`` (1e-10 ≤ tol < 1)."""
    if not 0 < tol < 1:
        raise ValueError(f"tol must be in (0, 1), got {tol!r}.")
    for t, p in _ORDER_TABLE:
        if tol >= t:
            return p
    raise ValueError(f"tol = {tol:g} is below what this version's FMM delivers "
                     f"({_ORDER_TABLE[-1][0]:g}); use method='direct' (exact to round-off).")


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


@dataclasses.dataclass(frozen=True, slots=True)
class FMMConfig:
    """Parameters of one FMM evaluation (derived from kernel, tol and the inputs)."""

    order: int
    depth: int
    near_radius: int
    reach: float
    leaf_size: int


class FMM:
    """Reusable fast multipole evaluator.

    Parameters
    ----------
    kernel : str, cutoff kernel (``physics.md``)
    tol : float, relative L2 accuracy of u against the regularized direct sum (∇u: 10·tol)
    precision : {"float64"}; float32 arrives with the GPU pipeline
    device : {"cpu", "auto"}
    leaf_size : int, target mean number of sources per leaf (larger leaves where
        the near field must reach further)
    near_radius : {1, 2}, leaf-level near-field stencil half-width in boxes
    order : int, optional, expansion order P overriding the rule of :func:`order_for_tol`

    ``evaluate(x, alpha, sigma, targets=None, gradient=True) -> (u, grad_u)``;
    ``timings`` holds the seconds of each stage of the last call.
    """

    def __init__(self, kernel="gaussian", tol=1e-6, precision="float64", device="cpu",
                 leaf_size=64, near_radius=1, order=None):
        self.kernel = get_kernel(kernel)
        self.order = order_for_tol(tol) if order is None else int(order)
        self.tol = float(tol)
        if precision != "float64":
            raise NotImplementedError("The FMM runs in float64 in this version; "
                                      "float32 arrives with the GPU pipeline.")
        if device not in ("cpu", "auto"):
            raise NotImplementedError(
                "The FMM runs on the CPU in this version; for the GPU use method='direct'.")
        if near_radius not in (1, 2):
            raise ValueError(f"near_radius must be 1 or 2, got {near_radius!r}.")
        self.leaf_size = int(leaf_size)
        self.near_radius = int(near_radius)
        self.timings: dict[str, float] = {}
        self.config: FMMConfig | None = None

    # -- the evaluation -----------------------------------------------------
    def evaluate(self, x, alpha, sigma, targets=None, gradient=True):
        """u (M, 3) and ∇u (M, 3, 3) (or None) at ``targets`` (sources when None)."""
        xp = np
        t_start = time.perf_counter()
        n = x.shape[0]
        exclude_self = targets is None
        y = x if exclude_self else targets
        m = y.shape[0]
        u = np.zeros((m, 3))
        grad_u = np.zeros((m, 3, 3)) if gradient else None
        if n == 0 or m == 0:
            return u, grad_u
        sigma = np.broadcast_to(np.asarray(sigma, dtype=np.float64), (n,))
        s_min, s_max = float(sigma.min()), float(sigma.max())
        name = self.kernel.name
        if name in ("algebraic", "winckelmans") and s_max > s_min * (1 + 1e-12):
            raise ValueError(
                f"method='fmm' with kernel {name!r} needs a uniform sigma (got {s_min:g} to "
                f"{s_max:g}): its far field expands the regularized kernel, which depends on "
                "sigma. The singular far field would only reach a tolerance of about "
                f"1.5/rho^2 for that kernel. Use kernel='gaussian' or method='direct'.")
        green = E.green_function(name, s_min)
        reach = near_field_reach(name, self.tol, s_max)
        lo = np.minimum(x.min(axis=0), y.min(axis=0))
        width = float((np.maximum(x.max(axis=0), y.max(axis=0)) - lo).max()) * (1 + 1e-9) + 1e-300
        depth = choose_depth(n, m, self.leaf_size,
                             min_leaf_width=reach / self.near_radius if reach > 0 else None,
                             width=width)
        P = self.order
        self.config = FMMConfig(P, depth, self.near_radius, reach, self.leaf_size)
        tree = build_tree(x, y, depth, xp, lo=lo, width=width)
        xs, alpha_s, sigma_s = x[tree.src_order], alpha[tree.src_order], sigma[tree.src_order]
        ys = y[tree.tgt_order]
        t_tree = time.perf_counter()

        u_s = np.zeros((m, 3))
        w_s = np.zeros((m, 3))
        g_s = np.zeros((m, 3, 3))
        t_up = t_m2l = t_down = t_tree
        if depth >= 2:
            multipoles = self._upward(tree, xs, alpha_s, P)
            t_up = time.perf_counter()
            locals_ = self._m2l(tree, multipoles, green, P)
            t_m2l = time.perf_counter()
            uf, gf = self._downward(tree, locals_, ys, P, gradient)
            u_s += uf / INV_4PI                     # accumulate unscaled, like the near field
            if gradient:
                g_s -= gf / INV_4PI                 # near field stores −G; see _finish
            t_down = time.perf_counter()
        self._near(tree, xs, alpha_s, sigma_s, ys, exclude_self, gradient, u_s, w_s, g_s)
        t_near = time.perf_counter()
        u[tree.tgt_order] = INV_4PI * u_s
        if gradient:
            grad_u[tree.tgt_order] = INV_4PI * (skew(w_s) - g_s)
        self.timings = {"tree": t_tree - t_start, "upward": t_up - t_tree,
                        "m2l": t_m2l - t_up, "downward": t_down - t_m2l,
                        "near": t_near - t_down, "total": t_near - t_start}
        logger.debug("FMM %s P=%d depth=%d timings %s", name, P, depth, self.timings)
        return u, grad_u

    # -- stages ---------------------------------------------------------------
    @staticmethod
    def _leaf_of(start, count):
        return np.searchsorted(start, np.arange(count), side="right") - 1

    def _upward(self, tree, xs, alpha_s, P):
        """Multipoles per level: dict level → array (8^level, n, 3)."""
        L = tree.depth
        n_coef = E.multi_indices(P).n
        centres = tree.box_centers(L, np)
        leaf = self._leaf_of(tree.src_start, xs.shape[0])
        M = np.zeros((8 ** L, n_coef, 3))
        chunk = max(1, (1 << 22) // (n_coef * 3))
        for c0 in range(0, xs.shape[0], chunk):
            c1 = min(xs.shape[0], c0 + chunk)
            mono = E.monomials(centres[leaf[c0:c1]] - xs[c0:c1], P, np)
            np.add.at(M, leaf[c0:c1], mono[:, :, None] * alpha_s[c0:c1, None, :])
        out = {L: M}
        for level in range(L, 2, -1):
            S = E.shift_matrices(_child_offsets(tree.box_width(level)), P, np, "m2m")  # (8,n,n)
            child = out[level].reshape(8 ** (level - 1), 8, n_coef, 3)
            out[level - 1] = np.einsum("ckm,pcmd->pkd", S, child)
        return out

    def _m2l(self, tree, multipoles, green, P):
        """Local expansions per level (levels 2..L) from M2L."""
        L = tree.depth
        locals_ = {}
        d_all = np.stack(np.meshgrid(*(np.arange(-3, 4),) * 3, indexing="ij"), axis=-1).reshape(-1, 3)
        for level in range(2, L + 1):
            M = multipoles[level]
            Lc = np.zeros_like(M)
            nbr = neighbor_table(level, 3, np)
            ix, iy, iz = morton_decode(np.arange(8 ** level, dtype=np.uint64), level, np)
            parity = np.stack([ix, iy, iz], axis=1) % 2
            sep = self.near_radius + 1 if level == L else 2
            w = float(tree.box_width(level))
            for o, d in enumerate(d_all):
                if np.abs(d).max() < sep:
                    continue
                ok = (nbr[:, o] >= 0) & np.all((parity + d >= -2) & (parity + d <= 3), axis=1)
                tgt = np.nonzero(ok)[0]
                if tgt.size == 0:
                    continue
                src = nbr[tgt, o]
                A = E.m2l_matrices(green, (-d * w)[None, :].astype(np.float64), P, np)[0]  # c_L − c_M
                # full square operator (|k|, |m| ≤ P): the total-degree truncation
                # |k| + |m| ≤ P is 11× cheaper at P = 12 but 50× less accurate here
                Lc[tgt] += np.matmul(A, M[src])
            locals_[level] = Lc
        return locals_

    def _downward(self, tree, locals_, ys, P, gradient):
        L = tree.depth
        n_coef = E.multi_indices(P).n
        for level in range(3, L + 1):
            S = E.shift_matrices(_child_offsets(tree.box_width(level)), P, np, "l2l")  # (8,n,n)
            parent = locals_[level - 1]
            add = np.einsum("cjk,pkd->pcjd", S, parent).reshape(8 ** level, n_coef, 3)
            locals_[level] = locals_[level] + add
        centres = tree.box_centers(L, np)
        leaf = self._leaf_of(tree.tgt_start, ys.shape[0])
        m = ys.shape[0]
        u = np.zeros((m, 3))
        g = np.zeros((m, 3, 3)) if gradient else None
        chunk = max(1, (1 << 21) // (n_coef * 3))
        for c0 in range(0, m, chunk):
            c1 = min(m, c0 + chunk)
            uc, gc = E.l2p(locals_[L][leaf[c0:c1]], ys[c0:c1] - centres[leaf[c0:c1]], P, np,
                           gradient=gradient)
            u[c0:c1] = uc
            if gradient:
                g[c0:c1] = gc
        return u, g

    def _near(self, tree, xs, alpha_s, sigma_s, ys, exclude_self, gradient, u_s, w_s, g_s):
        """Direct sums over the leaf stencil (unscaled sums, as kernels.direct)."""
        L = tree.depth
        nbr = neighbor_table(L, self.near_radius, np)
        ss, ts = tree.src_start, tree.tgt_start
        for leaf in np.nonzero(ts[1:] > ts[:-1])[0]:
            t0, t1 = int(ts[leaf]), int(ts[leaf + 1])
            boxes = nbr[leaf][nbr[leaf] >= 0]
            src = np.concatenate([np.arange(ss[b], ss[b + 1]) for b in boxes])
            if src.size == 0:
                continue
            d = ys[t0:t1, None, :] - xs[None, src, :]
            mask = (np.arange(t0, t1)[:, None] == src[None, :]) if exclude_self else None
            _accumulate_block(self.kernel, d, alpha_s[src], sigma_s[src], mask, gradient,
                              u_s[t0:t1], w_s[t0:t1], g_s[t0:t1])


def _child_offsets(child_width):
    """Offsets (8, 3) of the 8 child centres from their parent centre (Morton child order)."""
    c = np.arange(8)
    bits = np.stack([c & 1, (c >> 1) & 1, (c >> 2) & 1], axis=1)
    return (bits - 0.5) * float(child_width)
