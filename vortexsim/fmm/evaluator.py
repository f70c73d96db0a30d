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

Both backends run the same algorithm: NumPy on the CPU; on the GPU CuPy array
code (tree, M2M, M2L and L2L as GEMMs) plus CUDA kernels for the near field,
P2M and L2P (``kernels/cuda/fmm.cu``), all deterministic.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import math
import os
import time

import numpy as np

from ..kernels.cutoff import get_kernel
from ..kernels.direct import INV_4PI, _accumulate_block, skew
from . import expansions as E
from .tree import build_tree, choose_depth, morton_decode, neighbor_table, root_cube

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


def order_for_tol(tol: float, kernel_name: str = "algebraic") -> int:
    """Expansion order P for a relative tolerance ``tol`` (1e-6 ≤ tol < 1) and kernel."""
    if not 0 < tol < 1:
        raise ValueError(f"tol must be in (0, 1), got {tol!r}.")
    table = (_ORDER_TABLE_SINGULAR if kernel_name in ("singular", "gaussian", "polynomial")
             else _ORDER_TABLE)
    for t, p in table:
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
    """Reusable fast multipole evaluator (CPU through NumPy, GPU through CuPy + CUDA).

    Parameters
    ----------
    kernel : str, cutoff kernel (``physics.md``)
    tol : float, relative L2 accuracy of u against the regularized direct sum (∇u: 10·tol)
    precision : {"float64", "float32"}; the near field runs in this precision, the
        expansions always in float64 (their coefficients span too many decades for float32)
    device : {"auto", "cpu", "gpu"} or :class:`vortexsim.Device`, chosen once
    leaf_size : int, target mean number of points per leaf (larger leaves where the
        near field must reach further)
    near_radius : {1, 2}, leaf-level near-field stencil half-width in boxes
    order : int, optional, expansion order P overriding the rule of :func:`order_for_tol`
    memory_budget : float, optional, bytes the expansion arrays may take (default: a
        quarter of the GPU's memory, or of the host's RAM on the CPU); caps the depth

    ``evaluate(x, alpha, sigma, targets=None, gradient=True) -> (u, grad_u)`` takes
    arrays on the evaluator's device; ``timings`` holds the seconds of each stage of
    the last call (GPU stages are synchronized only when ``profile=True``), ``config``
    the derived parameters.  Operators and index tables that do not depend on
    positions are cached on the instance.
    """

    def __init__(self, kernel="gaussian", tol=1e-6, precision="float64", device="auto",
                 leaf_size=64, near_radius=1, order=None, profile=False, memory_budget=None):
        from ..backend import resolve_device  # noqa: PLC0415
        self.kernel = get_kernel(kernel)
        self.order = order_for_tol(tol, self.kernel.name) if order is None else int(order)
        self.tol = float(tol)
        if precision not in ("float64", "float32"):
            raise ValueError(f"precision must be 'float64' or 'float32', got {precision!r}.")
        self.dtype = np.dtype(precision)
        self.device = resolve_device(device)
        if near_radius not in (1, 2):
            raise ValueError(f"near_radius must be 1 or 2, got {near_radius!r}.")
        self.leaf_size = int(leaf_size)
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
                 root=None, check_root=True):
        """u (M, 3) and ∇u (M, 3, 3) (or None) at ``targets`` (the sources when None).

        x, alpha (N, 3), sigma (N,) [or scalar], targets (M, 3): arrays of the
        evaluator's device (validated by :func:`vortexsim.induced_velocity`).

        sigma_range : (float, float), optional
            (min σ, max σ) [L] when the caller knows them; otherwise read from ``sigma``.
        root : (array (3,), float), optional
            Lower corner and edge [L] of a cube holding every source and target (e.g. a
            time stepper's box with slack); otherwise the bounding cube.
        check_root : bool, default True
            Verify that a given ``root`` holds every point (a ValueError otherwise; one
            device-to-host sync).  With ``sigma_range``, ``root`` and ``check_root=False``
            an evaluation makes no device-to-host transfer at all; the caller then
            guarantees containment.
        """
        xp = self.device.xp
        clock = _Clock(xp, self.profile and self.device.is_gpu)
        dtype = self.dtype
        n = x.shape[0]
        exclude_self = targets is None
        y = x if exclude_self else targets
        m = y.shape[0]
        u = xp.zeros((m, 3), dtype)
        grad_u = xp.zeros((m, 3, 3), dtype) if gradient else None
        if n == 0 or m == 0:
            return u, grad_u
        x = xp.asarray(x, dtype=xp.float64)
        y = x if exclude_self else xp.asarray(y, dtype=xp.float64)
        alpha = xp.asarray(alpha, dtype=xp.float64)
        sigma = xp.broadcast_to(xp.asarray(sigma, dtype=xp.float64), (n,))
        # host scalars (one sync each on the GPU): core-radius range and root cube
        if sigma_range is None:
            s_min, s_max = float(sigma.min()), float(sigma.max())
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
        if root is None:
            lo, width = root_cube(x, y, xp)
            width = float(width)
        else:
            lo, width = xp.asarray(root[0], dtype=xp.float64), float(root[1])
        P = self.order
        depth = choose_depth(n, m, self.leaf_size, max_depth=self._max_depth(P))
        if reach > 0:
            # the deepest level whose leaves still reach `reach` with the stencil, and a
            # root cube stretched so that those leaves are no wider than they must be
            min_leaf = reach / self.near_radius
            depth_reach = max(0, math.ceil(math.log2(width / min_leaf)))
            width = max(width, (1 << depth_reach) * min_leaf * (1 + 1e-9))
            depth = min(depth, depth_reach)
        self.config = FMMConfig(P, depth, self.near_radius, reach, self.leaf_size)
        tree = build_tree(x, y, depth, xp, lo=lo, width=width,
                          check=root is not None and check_root)
        xs, alpha_s, sigma_s = x[tree.src_order], alpha[tree.src_order], sigma[tree.src_order]
        ys = y[tree.tgt_order]
        clock.lap("tree")

        u_s, g_s = self._near(tree, xs, alpha_s, sigma_s, ys, exclude_self, gradient)
        clock.lap("near")
        if depth >= 2:
            multipoles = self._upward(tree, xs, alpha_s, P)
            clock.lap("upward")
            locals_ = self._m2l(tree, multipoles, green, P)
            clock.lap("m2l")
            self._downward(tree, locals_, ys, P, gradient, u_s, g_s)
            clock.lap("downward")
        u[tree.tgt_order] = u_s.astype(dtype, copy=False)
        if gradient:
            grad_u[tree.tgt_order] = g_s.astype(dtype, copy=False)
        self.timings = clock.finish()
        logger.debug("FMM %s P=%d depth=%d timings %s", name, P, depth, self.timings)
        return u, grad_u

    # -- stages ---------------------------------------------------------------
    def _near(self, tree, xs, alpha_s, sigma_s, ys, exclude_self, gradient):
        """Near field u (M, 3), ∇u (M, 3, 3) of the sorted targets, float64 accumulators."""
        L = tree.depth
        nbr = self._cached(("nbr", L, self.near_radius),
                           lambda: neighbor_table(L, self.near_radius, np))
        if self.device.is_gpu:
            return self._near_cuda(tree, xs, alpha_s, sigma_s, ys, exclude_self, gradient, nbr)
        m = ys.shape[0]
        u_s, w_s, g_s = np.zeros((m, 3)), np.zeros((m, 3)), np.zeros((m, 3, 3))
        ss, ts = tree.src_start, tree.tgt_start
        xs_, as_, sg_, ys_ = (a.astype(self.dtype) for a in (xs, alpha_s, sigma_s, ys))

        def leaf_sum(leaf):
            t0, t1 = int(ts[leaf]), int(ts[leaf + 1])
            boxes = nbr[leaf][nbr[leaf] >= 0]
            src = np.concatenate([np.arange(ss[b], ss[b + 1]) for b in boxes])
            if src.size == 0:
                return
            d = ys_[t0:t1, None, :] - xs_[None, src, :]
            mask = (np.arange(t0, t1)[:, None] == src[None, :]) if exclude_self else None
            ub, wb, gb = (np.zeros_like(a[t0:t1], dtype=self.dtype) for a in (u_s, w_s, g_s))
            _accumulate_block(self.kernel, d, as_[src], sg_[src], mask, gradient, ub, wb, gb)
            u_s[t0:t1], w_s[t0:t1], g_s[t0:t1] = ub, wb, gb

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

    def _near_cuda(self, tree, xs, alpha_s, sigma_s, ys, exclude_self, gradient, nbr):
        import cupy as cp  # noqa: PLC0415
        from ..kernels.direct import source_parameters  # noqa: PLC0415
        from ..kernels.modules import CTYPES, get_function  # noqa: PLC0415
        dtype = self.dtype
        nbr_d = self._cached(("nbr_d", tree.depth, self.near_radius), lambda: cp.asarray(nbr))
        block = 128
        name = (f"p2p_near<{CTYPES[dtype.name]},{self.kernel.code},"
                f"{'true' if gradient else 'false'},{block}>")
        fn = get_function("fmm.cu", name)
        m = ys.shape[0]
        u = cp.empty((m, 3), dtype)
        g = cp.empty((m, 3, 3), dtype) if gradient else u
        param = source_parameters(self.kernel, sigma_s.astype(dtype), cp).astype(dtype)
        fn((tree.n_leaves,), (block,),
           (cp.ascontiguousarray(xs, dtype=dtype), cp.ascontiguousarray(alpha_s, dtype=dtype),
            cp.ascontiguousarray(param), tree.src_start, cp.ascontiguousarray(ys, dtype=dtype),
            tree.tgt_start, nbr_d, np.int32(nbr.shape[1]), np.int32(1 if exclude_self else 0),
            u, g))
        return u.astype(cp.float64), (g.astype(cp.float64) if gradient else None)

    def _upward(self, tree, xs, alpha_s, P):
        """Multipoles per level: dict level → array (8^level, n, 3), float64."""
        xp = self.device.xp
        L = tree.depth
        mi = E.multi_indices(P)
        centres = tree.box_centers(L, xp)
        if self.device.is_gpu:
            from ..kernels.modules import get_function  # noqa: PLC0415
            kidx = self._cached(("kidx", P), lambda: xp.asarray(mi.k.astype(np.int32)))
            M = xp.empty((8 ** L, mi.n, 3))
            total = 8 ** L * mi.n
            get_function("fmm.cu", "p2m_leaves<double>")(
                ((total + 127) // 128,), (128,),
                (xs, alpha_s, tree.src_start, xp.ascontiguousarray(centres), kidx,
                 np.int32(mi.n), np.int64(8 ** L), M))
        else:
            M = np.zeros((8 ** L, mi.n, 3))
            ss = tree.src_start
            for leaf in np.nonzero(ss[1:] > ss[:-1])[0]:          # one GEMM per leaf
                s0, s1 = ss[leaf], ss[leaf + 1]
                M[leaf] = E.p2m(xs[s0:s1], alpha_s[s0:s1], centres[leaf], P, np)
        out = {L: M}
        for level in range(L, 2, -1):
            S = E.shift_matrices(xp.asarray(_child_offsets(tree.box_width(level))), P, xp, "m2m")
            child = out[level].reshape(8 ** (level - 1), 8, mi.n, 3)
            parent = xp.zeros((8 ** (level - 1), mi.n, 3))
            for c in range(8):
                parent += _apply(S[c], child[:, c], xp)
            out[level - 1] = parent
        return out

    def _m2l_pairs_host(self, level, sep):
        """Host index tables: [(offset d (3,), target boxes, source boxes)] for one level."""
        def build():
            nbr = neighbor_table(level, 3, np)
            ix, iy, iz = morton_decode(np.arange(8 ** level, dtype=np.uint64), level, np)
            parity = np.stack([ix, iy, iz], axis=1) % 2
            pairs = []
            for o, d in enumerate(_OFFSETS_3):
                ok = (nbr[:, o] >= 0) & _interacts(parity, d, sep)
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
        """Per parity class p = key & 7: (offset indices O_p into OFFSETS_3, gather (B/8, |O_p|)).

        gather[j, q] is the source box of target box p + 8j at offset O_p[q], or 8^level
        (a zero column) where that box lies outside the grid.
        """
        def build():
            nbr = neighbor_table(level, 3, np)
            zero = 8 ** level
            classes = []
            for p in range(8):
                b = np.array([p & 1, (p >> 1) & 1, (p >> 2) & 1])
                offsets = np.nonzero(_interacts(b, _OFFSETS_3, sep))[0]
                g = nbr[p::8][:, offsets]
                classes.append((offsets, self.device.xp.asarray(np.where(g >= 0, g, zero))))
            return classes
        return self._cached(("m2l_classes", level, sep), build)

    def _m2l(self, tree, multipoles, green, P):
        """Local expansions per level (levels 2..L) from M2L (see the comments per path)."""
        xp = self.device.xp
        L = tree.depth
        locals_ = {}
        homogeneous = green.sigma2 == 0.0 and green.terms == ((1.0, 0.5),)
        degree = xp.asarray(E.multi_indices(P).k.sum(axis=1).astype(np.float64))
        for level in range(2, L + 1):
            M = multipoles[level]
            sep = self.near_radius + 1 if level == L else 2
            w = float(tree.box_width(level))
            if homogeneous:
                # 1/r: A(w)[k, m] = w^−(1+|k|+|m|) A(1)[k, m], and A(1) = U C Vᵀ exactly
                # (harmonic_bases).  Boxes of one parity class (key & 7, i.e. every 8th box)
                # share their interaction offsets O_p, so per class and component one GEMM
                #   L̃[:, t] = [C_o]_{o ∈ O_p} (k-major) · M̃[k, src(t, o)]   for all t of p
                # on compressed, coefficient-major multipoles (no zero blocks, no transposes).
                U, V = self._cached(("harmonic", P),
                                    lambda: tuple(xp.asarray(a) for a in E.harmonic_bases(P)))
                scale = w ** -degree
                Mt = _apply(V.T, M * scale[None, :, None], xp)       # (B, r, 3)
                B, r = Mt.shape[0], Mt.shape[1]
                Mcm = xp.concatenate([Mt.transpose(1, 2, 0), xp.zeros((r, 3, 1))], axis=2)
                Lt = xp.empty((r, 3, B))
                for p, (offsets, gather) in enumerate(self._m2l_classes(level, sep)):
                    Kp = self._cached(("m2l_class_cores", P, sep, p), lambda offsets=offsets:
                                      xp.asarray(_class_cores(E.unit_m2l_cores(P), offsets)))
                    nb = gather.shape[0]
                    chunk = max(1, int(self._chunk_bytes // (len(offsets) * r * 8)))
                    for j0 in range(0, nb, chunk):
                        j1 = min(nb, j0 + chunk)
                        g = gather[j0:j1].T                            # (|O_p|, b)
                        for c in range(3):
                            X = Mcm[:, c, g].reshape(r * len(offsets), j1 - j0)
                            Lt[:, c, p + 8 * j0:p + 8 * j1:8] = Kp @ X
                Lc = _apply(U, Lt.transpose(2, 0, 1), xp) * (scale / w)[None, :, None]
            else:
                # regularized G: operators depend on σ/w, built per level, one GEMM per offset
                idx, binom = (xp.asarray(a) for a in E._m2l_tables(P))
                pairs = self._m2l_pairs(level, sep)
                Lc = xp.zeros_like(M)
                R = xp.asarray(np.array([-d * w for d, _, _ in pairs]).reshape(-1, 3))  # c_L − c_M
                T = E.kernel_taylor(green, R, 2 * P, xp)
                for o, (_, tgt, src) in enumerate(pairs):
                    # full square operator (|k|, |m| ≤ P): the total-degree truncation
                    # |k| + |m| ≤ P is 11× cheaper at P = 12 but 50× less accurate here
                    Lc[tgt] += _apply(T[o][idx] * binom, M[src], xp)
            locals_[level] = Lc
        return locals_

    def _downward(self, tree, locals_, ys, P, gradient, u_s, g_s):
        """L2L to the leaves, then L2P added into u_s, g_s (sorted targets)."""
        xp = self.device.xp
        L = tree.depth
        mi = E.multi_indices(P)
        for level in range(3, L + 1):
            S = E.shift_matrices(xp.asarray(_child_offsets(tree.box_width(level))), P, xp, "l2l")
            parent = locals_[level - 1]
            child = locals_[level].reshape(8 ** (level - 1), 8, mi.n, 3)
            for c in range(8):
                child[:, c] += _apply(S[c], parent, xp)
        centres = tree.box_centers(L, xp)
        Ll = locals_[L]
        if self.device.is_gpu:
            from ..kernels.modules import get_function  # noqa: PLC0415
            leaf = _leaf_of(tree.tgt_start, ys.shape[0], xp)
            kidx = self._cached(("kidx", P), lambda: xp.asarray(mi.k.astype(np.int32)))
            m = ys.shape[0]
            g = g_s if gradient else u_s
            get_function("fmm.cu", f"l2p_targets<double,{'true' if gradient else 'false'}>")(
                ((m + 127) // 128,), (128,),
                (xp.ascontiguousarray(Ll), xp.ascontiguousarray(centres), leaf, ys, kidx,
                 np.int32(mi.n), np.int32(P), np.int64(m), u_s, g))
            return
        ts = tree.tgt_start
        for box in np.nonzero(ts[1:] > ts[:-1])[0]:                # two GEMMs per leaf
            t0, t1 = ts[box], ts[box + 1]
            uc, gc = E.l2p_box(Ll[box], ys[t0:t1] - centres[box], P, np, gradient=gradient)
            u_s[t0:t1] += uc
            if gradient:
                g_s[t0:t1] += gc

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

    def _cached(self, key, build):
        key = key + (self.device.kind,)
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]


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


def _interacts(parity, d, sep):
    """M2L rule: a box of ``parity`` (…, 3) takes the box at offset ``d`` (…, 3) when their
    parents are neighbours (parity + d ∈ [−2, 3] per axis) and it lies outside the
    near stencil (max |d| ≥ ``sep``)."""
    return (np.all((parity + d >= -2) & (parity + d <= 3), axis=-1)
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


def _leaf_of(start, count, xp):
    """Leaf index of each of ``count`` sorted points from CSR starts."""
    return xp.searchsorted(start, xp.arange(count), side="right") - 1


_OFFSETS_3 = E.OFFSETS_3


def _child_offsets(child_width):
    """Offsets (8, 3) of the 8 child centres from their parent centre (Morton child order)."""
    c = np.arange(8)
    bits = np.stack([c & 1, (c >> 1) & 1, (c >> 2) & 1], axis=1)
    return (bits - 0.5) * float(child_width)
