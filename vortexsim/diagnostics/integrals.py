r"""Integral diagnostics of a set of vortex elements (``physics.md``, same 1/4π convention).

All functions take positions x (N, 3) [L] and strengths alpha (N, 3) [L³/T] as NumPy
or CuPy arrays and return arrays of the same namespace (no host transfer).

    total vorticity   Ω = Σ α_p                         [L³/T]
    linear impulse    P = ½ Σ x_p × α_p                 [L⁴/T]
    angular impulse   A = ⅓ Σ x_p × (x_p × α_p)         [L⁵/T]

Ring position and size are measured from the impulse, not from single elements
(whose velocities include the swirl around the core):

    ring centre along n̂   Z = Σ z_p w_p / Σ w_p,  w_p = r_p² |α_p|,  z_p = (x_p − c)·n̂,
                          r_p = distance of x_p from the axis through c along n̂
    ring radius           R = sqrt(|P·n̂| / (π |Γ|))    (P = Γ π R² n̂ for a thin ring)

Quadratic diagnostics of the regularized vorticity field ω_σ(x) = Σ_q α_q ζ_σq(x − x_q)
(Winckelmans & Leonard, J. Comput. Phys. 109 (1993), §4), per unit density:

    kinetic energy  E  = ½ ∫ ψ·ω dV = (1/8π) Σ_p Σ_q (α_p·α_q) g(r_pq/σ_pq) / σ_pq   [L⁵/T²]
    helicity        H  = ∫ u·ω dV  ≈ Σ_p u(x_p)·α_p                                 [L⁴/T²]
    enstrophy       Ω₂ = ∫ ω·ω dV  = Σ_p Σ_q (α_p·α_q) ζ(r_pq/σ_pq) / σ_pq³         [L³/T²]

with σ_pq² = σ_p² + σ_q² (the two blobs convolved), ζ the kernel's smoothing function and
g(ρ) = ∫_ρ^∞ q(t)/t² dt its stream-function factor (G_σ(r) = g(r/σ)/(4πσ) is the
regularized Green's function: −∇²G_σ = ζ_σ):

    singular 1/ρ;  gaussian erf(ρ/√2)/ρ;  algebraic (ρ²+1)^(−1/2);
    winckelmans (ρ² + 3/2)(ρ²+1)^(−3/2);  polynomial 2 − ρ (ρ ≤ 1), 1/ρ (ρ > 1).

For the Gaussian kernel these double sums are exact for ω_σ (the convolution of two
Gaussian blobs is the Gaussian blob of σ_pq); for the algebraic kernels the same σ_pq rule
is an approximation that is exact in the far field.  Self pairs (p = q) are included
(finite for smooth kernels; dropped where the factor is infinite: ``singular``, and
``polynomial`` has no ζ, so its enstrophy is NaN).

Two ways to the same sums: :func:`kinetic_energy`, :func:`enstrophy` and
:func:`energy_and_enstrophy` here are blocked direct double sums (memory O(N + block),
never an N × M array, cost O(N²)): the reference, and the cheaper way for small N.  At
production size :meth:`vortexsim.fmm.FMM.fields` evaluates, at every element, the
vector potential ψ_p and the vorticity ω_p seen through its blob and its velocity u_p
in one O(N) pass (or, for E, Ω₂, H alone, symmetric shares at half the near field's
cost); :func:`field_sums` turns them into E = ½ Σ α_p·ψ_p, Ω₂ = Σ α_p·ω_p and
H = Σ α_p·u_p.  :meth:`vortexsim.Simulation.diagnostics` picks the way by size and takes
every sum of its row in one pass (:class:`RowSums`: :func:`element_rows`, then one
product); in the periodic box the sums come from the Fourier modes
(:meth:`vortexsim.summation.spectral.SpectralSum.field_sums`).
"""
from __future__ import annotations

import itertools
import math
import types

import numpy as np

from ..backend import array_namespace
from ..kernels.cutoff import blob_pair_factors, get_kernel, stream_factor

__all__ = ["total_vorticity", "linear_impulse", "angular_impulse", "ring_centre",
           "ring_radius", "ring_frame", "kinetic_energy", "enstrophy", "energy_and_enstrophy",
           "helicity", "stream_factor", "field_sums", "element_rows", "RowSums",
           "ROW_COLUMNS"]


def total_vorticity(alpha):
    """Ω = Σ α_p, array (3,)."""
    return alpha.sum(axis=0)


def linear_impulse(x, alpha):
    """P = ½ Σ x_p × α_p, array (3,)."""
    xp = array_namespace(x, alpha)
    return 0.5 * xp.cross(x, alpha).sum(axis=0)


def angular_impulse(x, alpha):
    """A = ⅓ Σ x_p × (x_p × α_p), array (3,)."""
    xp = array_namespace(x, alpha)
    return xp.cross(x, xp.cross(x, alpha)).sum(axis=0) / 3.0


def ring_centre(x, alpha, axis, origin):
    """Impulse-weighted position of a ring along its axis: the point c + Z n̂, array (3,).

    Parameters
    ----------
    x, alpha : (N, 3), the elements of one ring
    axis : (3,), the ring's axis direction (normalised here)
    origin : (3,), a point on the axis
    """
    xp = array_namespace(x, alpha)
    n_hat = xp.asarray(axis, dtype=x.dtype)
    n_hat = n_hat / xp.linalg.norm(n_hat)
    origin = xp.asarray(origin, dtype=x.dtype)
    rel = x - origin
    z = rel @ n_hat
    r2 = (rel * rel).sum(axis=1) - z * z
    w = r2 * xp.linalg.norm(alpha, axis=1)
    return origin + ((z * w).sum() / w.sum()) * n_hat


def ring_radius(x, alpha, circulation, axis):
    """Impulse-based radius sqrt(|P·n̂| / (π |Γ|)) of one ring [L] (0-d array)."""
    xp = array_namespace(x, alpha)
    n_hat = xp.asarray(axis, dtype=x.dtype)
    n_hat = n_hat / xp.linalg.norm(n_hat)
    return xp.sqrt(xp.abs(linear_impulse(x, alpha) @ n_hat) / (math.pi * abs(circulation)))


def ring_frame(x, alpha, circulation, axis_hint):
    """Current axis n̂ and a point on the axis of one ring, from its elements.

    n̂ = sign(Γ) P/|P| (P the ring's linear impulse; the initial ``axis_hint`` when P = 0);
    the point is the |α|-weighted centroid of the elements.  Arrays (3,), (3,).
    """
    xp = array_namespace(x, alpha)
    p = linear_impulse(x, alpha) * (1.0 if circulation >= 0 else -1.0)
    norm = xp.linalg.norm(p)
    hint = xp.asarray(axis_hint, dtype=x.dtype)
    hint = hint / xp.linalg.norm(hint)
    n_hat = xp.where(norm > 0, p / xp.where(norm > 0, norm, 1.0), hint)
    w = xp.linalg.norm(alpha, axis=1)
    origin = (x * w[:, None]).sum(axis=0) / w.sum()
    return n_hat, origin


def field_sums(alpha, fields):
    """(E, Ω₂, H) as 0-d arrays from the fields at the elements
    (:class:`vortexsim.fmm.fields.Fields`, the elements' u, ψ, ω in their order):
    E = ½ Σ α_p·ψ_p, Ω₂ = Σ α_p·ω_p (NaN without ω), H = Σ α_p·u_p."""
    xp = array_namespace(alpha)
    a = alpha.astype(xp.float64, copy=False)
    enstrophy = xp.asarray(float("nan")) if fields.omega is None else (a * fields.omega).sum()
    return 0.5 * (a * fields.psi).sum(), enstrophy, (a * fields.u).sum()


#: the columns of :func:`element_rows`, in order: α (3), x × α (3), x × (x × α) (3),
#: α·ψ, α·ω, α·u, then |α| (1), |α| r (3), |α| r_i r_j (6: i ≤ j), |α| r_i r_j r_k
#: (10: i ≤ j ≤ k), r = x − x[ref] (the moments of a ring about one of its elements)
ROW_COLUMNS = 32
#: elements per block of :class:`RowSums` (its rows take 256 B per element of a block)
ROW_BLOCK = 1 << 20
#: threads per block of the GPU's row sums (``kernels/cuda/row_sums.cu``)
_ROW_THREADS = 256


def _sm_count(xp):
    """The current GPU's multiprocessors."""
    return xp.cuda.Device().attributes["MultiProcessorCount"]
_PAIRS = tuple(itertools.combinations_with_replacement(range(3), 2))
_TRIPLES = tuple(itertools.combinations_with_replacement(range(3), 3))


def element_rows(x, alpha, fields=None, ref=None, x_ref=None, moments=True):
    """The terms of a diagnostics row per element, (N, :data:`ROW_COLUMNS`) float64: sums
    over all elements give Ω, 2P, 3A and (with ``fields``, the elements' u, ψ, ω:
    :class:`~vortexsim.fmm.fields.Fields` or shares) 2E, Ω₂, H; sums over one ring give
    the moments :class:`RowSums` turns into its centre.  ``ref`` (N,) int: each element's
    reference element (its ring's first; default itself), a row of ``x_ref`` (default
    ``x``; all the elements when ``x`` is a block of them).  Columns without their field
    (no ``fields``, or ω None) are 0, and so are the moments about the reference
    (columns 13 on) without ``moments`` (NumPy; they are 0 anyway where every element
    is its own reference, as when there are no rings).  NumPy is the specification; on
    the GPU one elementwise kernel (``kernels/cuda/diagnostic_rows.cuh``)."""
    xp = array_namespace(x, alpha)
    n = x.shape[0]
    x = xp.ascontiguousarray(x, dtype=xp.float64)
    a = xp.ascontiguousarray(alpha, dtype=xp.float64)
    x_ref = x if x_ref is None else xp.ascontiguousarray(x_ref, dtype=xp.float64)
    if ref is None:
        ref = xp.arange(n, dtype=xp.int64)
    has, psi, omega, u = _field_columns(fields, xp)
    if xp is not np:
        from ..kernels.modules import elementwise_kernel  # noqa: PLC0415
        rows = xp.empty((n, ROW_COLUMNS))
        if n:
            elementwise_kernel("vortexsim_diagnostic_row")(
                x, a, xp.ascontiguousarray(ref, dtype=xp.int64), x_ref,
                *(xp.ascontiguousarray(f, dtype=xp.float64) for f in (psi, omega, u)),
                np.int32(has), rows, size=n)
        return rows
    rows = np.zeros((n, ROW_COLUMNS))
    xa = np.cross(x, a)
    rows[:, 0:3], rows[:, 3:6], rows[:, 6:9] = a, xa, np.cross(x, xa)
    if has & 1:
        rows[:, 9], rows[:, 11] = (a * psi).sum(axis=1), (a * u).sum(axis=1)
    if has & 2:
        rows[:, 10] = (a * omega).sum(axis=1)
    w = np.sqrt((a * a).sum(axis=1))
    rows[:, 12] = w
    if not moments:
        return rows
    r = x - x_ref[ref]
    rows[:, 13:16] = w[:, None] * r
    for k, (i, j) in enumerate(_PAIRS):
        rows[:, 16 + k] = w * r[:, i] * r[:, j]
    for k, (i, j, m) in enumerate(_TRIPLES):
        rows[:, 22 + k] = w * r[:, i] * r[:, j] * r[:, m]
    return rows


def _field_columns(fields, xp):
    """(has, ψ, ω, u) of a row's ``fields`` for the kernels: ``has`` bit 0 with ψ and u,
    bit 1 with ω; a (1, 3) zero array stands for each field not given."""
    zero = xp.zeros((1, 3))
    if fields is None:
        return 0, zero, zero, zero
    has = 1 | (2 if fields.omega is not None else 0)
    return has, fields.psi, zero if fields.omega is None else fields.omega, fields.u


class RowSums:
    """The element sums of a diagnostics row in one pass: the sum over all elements and
    over each of R rings (contiguous ranges) of the rows of :func:`element_rows`.  On the
    GPU one kernel (``kernels/cuda/row_sums.cu``: no rows written, chunk sums in a fixed
    order) and one sum of its chunks; in NumPy the rows :data:`ROW_BLOCK` elements at a
    time, each block's (R + 1, B) × (B, 32) product added in block order;
    :meth:`finish` then turns the (R + 1, 32) sums, on the host, into the row's values
    and each ring's :func:`ring_frame`, :func:`ring_centre` and :func:`ring_radius`.

    Parameters
    ----------
    ranges : R pairs (start, stop): each ring's elements x[start:stop] of the N elements
    circulations : R floats Γ [L²/T]; axis_hints : (R, 3), each ring's initial axis
    n : int, N; xp : the array namespace

    The centre needs the third moments of |α| about the ring's centroid; they are taken
    about the ring's first element (so that they stay of the ring's size, wherever it
    is) and moved to the centroid on the host.
    """

    def __init__(self, ranges, circulations, axis_hints, n, xp):
        idx = np.arange(n)
        starts = np.array([a for a, _ in ranges], dtype=np.int64)
        stops = np.array([b for _, b in ranges], dtype=np.int64)
        hints = np.asarray(axis_hints, dtype=np.float64).reshape(len(ranges), 3)
        self.hints = hints / np.linalg.norm(hints, axis=1, keepdims=True)
        self.gamma = np.asarray(circulations, dtype=np.float64)
        self.rings = len(ranges)
        ref = idx.copy()
        for a, b in zip(starts, stops):
            ref[a:b] = a
        r = self.rings
        self.xp = xp
        # the segments: all elements, then each ring ([start, stop) pairs, flat)
        self.bounds = np.concatenate([[0, n], np.column_stack([starts, stops]).ravel()]
                                     ).astype(np.int64)
        if xp is np:                   # (R + 1, N): all elements, each ring's
            inside = (idx >= starts[:, None]) & (idx < stops[:, None])
            self.segments = np.concatenate([np.ones((1, n)), inside.astype(np.float64)])
            self.ref, self.starts = ref, starts
            return
        # on the GPU one host-to-device transfer: the references, the rings' first
        # elements and the segments (row_sums.cu reads them as ranges)
        packed = xp.asarray(np.concatenate([ref, starts, self.bounds]))
        self.ref = packed[:n]
        self.starts = packed[n:n + r]
        self.seg = packed[n + r:]
        # chunks of at least 8 rounds of a block, about 4 blocks per multiprocessor in all
        longest = int(max(n, 1))
        self.chunk = max(8 * _ROW_THREADS, -(-longest // (4 * _sm_count(xp))))
        self.chunk = -(-self.chunk // _ROW_THREADS) * _ROW_THREADS
        self.chunks = -(-longest // self.chunk)

    def __call__(self, x, alpha, fields=None, extra=()):
        """The device sums (R + 1, 32) of :func:`element_rows` and, after them, the ring's
        reference points (R, 3) and ``extra`` (0-d arrays), flat in one float64 array:
        what :meth:`finish` takes after one transfer."""
        xp = self.xp
        if xp is not np:
            return self._device_sums(x, alpha, fields, extra)
        sums = None
        for lo in range(0, max(x.shape[0], 1), ROW_BLOCK):   # (N, 32) rows a block at a time
            part = slice(lo, lo + ROW_BLOCK)
            block = None if fields is None else types.SimpleNamespace(
                psi=fields.psi[part], u=fields.u[part],
                omega=None if fields.omega is None else fields.omega[part])
            s = self.segments[:, part] @ element_rows(x[part], alpha[part], block,
                                                      self.ref[part], x_ref=x,
                                                      moments=self.rings > 0)
            sums = s if sums is None else sums + s
        refs = x[self.starts].astype(xp.float64)
        return xp.concatenate([sums.ravel(), refs.ravel()] + [
            xp.ravel(xp.asarray(v, dtype=xp.float64)) for v in extra])

    def _device_sums(self, x, alpha, fields, extra):
        """:meth:`__call__` on the GPU: the segments' sums by ``row_sums.cu`` (no rows
        written), then each segment's chunks added in order."""
        xp = self.xp
        from ..kernels.modules import get_function  # noqa: PLC0415
        x = xp.ascontiguousarray(x, dtype=xp.float64)
        a = xp.ascontiguousarray(alpha, dtype=xp.float64)
        has, psi, omega, u = _field_columns(fields, xp)
        s = self.rings + 1
        part = xp.empty((s, self.chunks, ROW_COLUMNS))
        get_function("row_sums.cu", f"row_sums<{_ROW_THREADS}>")(
            (self.chunks, s), (_ROW_THREADS,),
            (x, a, self.ref, x, *(xp.ascontiguousarray(f, dtype=xp.float64)
                                  for f in (psi, omega, u)),
             np.int32(has), self.seg, np.int64(self.chunk), part))
        sums = part.sum(axis=1)
        refs = x[self.starts]
        return xp.concatenate([sums.ravel(), refs.ravel()] + [
            xp.ravel(xp.asarray(v, dtype=xp.float64)) for v in extra])

    def finish(self, flat):
        """The host values from :meth:`__call__`'s array (NumPy): a dict with
        ``total_vorticity``, ``linear_impulse``, ``angular_impulse`` (3,), ``field_sums``
        (E, Ω₂, H from the fields: 0 without them), ``ring_centre`` (R, 3),
        ``ring_radius`` (R,), ``ring_axis`` (R, 3), and ``extra`` (the rest)."""
        r = self.rings
        sums = flat[:(r + 1) * ROW_COLUMNS].reshape(r + 1, ROW_COLUMNS)
        refs = flat[(r + 1) * ROW_COLUMNS:(r + 1) * ROW_COLUMNS + 3 * r].reshape(r, 3)
        total, ring = sums[0], sums[1:]
        out = {"total_vorticity": total[0:3], "linear_impulse": 0.5 * total[3:6],
               "angular_impulse": total[6:9] / 3.0,
               "field_sums": (0.5 * total[9], total[10], total[11]),
               "extra": flat[(r + 1) * ROW_COLUMNS + 3 * r:]}
        impulse = 0.5 * ring[:, 3:6]                                   # P of each ring
        p = impulse * np.where(self.gamma >= 0, 1.0, -1.0)[:, None]
        norm = np.linalg.norm(p, axis=1, keepdims=True)
        n_hat = np.where(norm > 0, p / np.where(norm > 0, norm, 1.0), self.hints)
        w0, w1 = ring[:, 12], ring[:, 13:16]
        o = w1 / w0[:, None]                         # the |α|-weighted centroid − reference
        w2, w3 = np.zeros((r, 3, 3)), np.zeros((r, 3, 3, 3))
        for k, (i, j) in enumerate(_PAIRS):
            for a, b in {(i, j), (j, i)}:
                w2[:, a, b] = ring[:, 16 + k]
        for k, ijk in enumerate(_TRIPLES):
            for a, b, c in set(itertools.permutations(ijk)):
                w3[:, a, b, c] = ring[:, 22 + k]
        # central moments of |α| about the centroid: C = W2 − W1 oᵀ,
        # T_ijk = W3 − (o_i W2_jk + o_j W2_ik + o_k W2_ij) + 2 W0 o_i o_j o_k
        c2 = w2 - w1[:, :, None] * o[:, None, :]
        t3 = (w3 - np.einsum("ri,rjk->rijk", o, w2) - np.einsum("rj,rik->rijk", o, w2)
              - np.einsum("rk,rij->rijk", o, w2)
              + 2.0 * w0[:, None, None, None] * np.einsum("ri,rj,rk->rijk", o, o, o))
        # ring_centre about the centroid: weights (|rel|² − z²)|α|, z = rel·n̂
        wsum = np.einsum("rii->r", c2) - np.einsum("ri,rij,rj->r", n_hat, c2, n_hat)
        zsum = (np.einsum("rj,rjii->r", n_hat, t3)
                - np.einsum("ri,rj,rk,rijk->r", n_hat, n_hat, n_hat, t3))
        out["ring_centre"] = refs + o + (zsum / wsum)[:, None] * n_hat
        out["ring_radius"] = np.sqrt(np.abs((impulse * n_hat).sum(axis=1))
                                     / (math.pi * np.abs(self.gamma)))
        out["ring_axis"] = n_hat
        return out


def helicity(alpha, u):
    """H = Σ_p u(x_p)·α_p [L⁴/T²] from the velocity at the elements (0-d array)."""
    return (alpha * u).sum()


def _pair_sum(x, alpha, sigma, sources, pair_factors, pairs_per_block):
    """Σ_p Σ_q (α_p·α_q) F_k(r_pq², σ_pq²) for each factor F_k, in blocks of targets
    (list of 0-d float64 arrays)."""
    xp = array_namespace(x, alpha, sigma)
    xs, alpha_s, sigma_s = (x, alpha, sigma) if sources is None else sources
    n_t, n_s = x.shape[0], xs.shape[0]
    if pairs_per_block is None:
        pairs_per_block = 1 << 18 if xp is np else 1 << 25
    bt = max(1, int(pairs_per_block) // max(1, n_s))
    s2_s = (sigma_s * sigma_s)[None, :]
    totals = [xp.zeros((), dtype=xp.float64) for _ in pair_factors]
    for t0 in range(0, n_t, bt):
        t1 = min(n_t, t0 + bt)
        d = x[t0:t1, None, :] - xs[None, :, :]
        r2 = (d * d).sum(axis=2)
        s2 = sigma[t0:t1, None] ** 2 + s2_s
        dot = alpha[t0:t1] @ alpha_s.T
        for k, pair_factor in enumerate(pair_factors):
            factor = pair_factor(r2, s2)
            factor = xp.where(xp.isfinite(factor), factor, 0.0)
            totals[k] = totals[k] + (dot * factor).sum()
    return totals


def _energy_factor(kernel, xp):
    def factor(r2, s2):
        return blob_pair_factors(kernel, r2, s2, xp)[0] / (8.0 * math.pi)
    return factor


def _enstrophy_factor(kernel, xp):
    def factor(r2, s2):
        return blob_pair_factors(kernel, r2, s2, xp)[1]
    return factor


def kinetic_energy(x, alpha, sigma, kernel="gaussian", sources=None, pairs_per_block=None):
    """E = (1/8π) Σ_p Σ_q (α_p·α_q) g(r_pq/σ_pq)/σ_pq [L⁵/T²], per unit density (0-d array).

    Parameters
    ----------
    x, alpha : (N, 3); sigma : (N,): the elements p (NumPy or CuPy)
    kernel : cutoff kernel name
    sources : (x_s, alpha_s, sigma_s), optional, the elements q (default: the elements
        themselves; pass elements + images for the energy of the fluid above a ground plane)
    pairs_per_block : work-array size (default 2^18 on the CPU, 2^25 on the GPU)
    """
    xp = array_namespace(x, alpha, sigma)
    return _pair_sum(x, alpha, sigma, sources, [_energy_factor(kernel, xp)], pairs_per_block)[0]


def enstrophy(x, alpha, sigma, kernel="gaussian", sources=None, pairs_per_block=None):
    """Ω₂ = Σ_p Σ_q (α_p·α_q) ζ(r_pq/σ_pq)/σ_pq³ [L³/T²] (0-d array; NaN without ζ).

    Same arguments as :func:`kinetic_energy`.
    """
    xp = array_namespace(x, alpha, sigma)
    if get_kernel(kernel).zeta is None:
        return xp.asarray(float("nan"))
    return _pair_sum(x, alpha, sigma, sources, [_enstrophy_factor(kernel, xp)],
                     pairs_per_block)[0]


def energy_and_enstrophy(x, alpha, sigma, kernel="gaussian", sources=None,
                         pairs_per_block=None):
    """(E, Ω₂) of :func:`kinetic_energy` and :func:`enstrophy` in one blocked pass."""
    xp = array_namespace(x, alpha, sigma)
    if get_kernel(kernel).zeta is None:
        return kinetic_energy(x, alpha, sigma, kernel, sources, pairs_per_block), \
            xp.asarray(float("nan"))
    e, w = _pair_sum(x, alpha, sigma, sources,
                     [_energy_factor(kernel, xp), _enstrophy_factor(kernel, xp)], pairs_per_block)
    return e, w
