r"""The spectral sum at the nodes of the periodic lattice, by plain FFTs.

After a periodic remeshing the elements sit on the n³ lattice x_j = j h, h = L/n, node
(i, j, k) in row (i·n + j)·n + k (:mod:`vortexsim.geometry.remesh`).  There the Fourier
series of :mod:`vortexsim.summation.spectral` folds onto the lattice's own modes: every wave vector
q = (2π/L) m of the series is k + (2π/L) n a for one principal k (m mod n) and an alias a,
e^{i q·x_j} = e^{i k·x_j} and F(q) = Σ_p α_p e^{−i q·x_p} = F(k), so

    u(x_j)     = Σ_k e^{i k·x_j} i A(k) × F(k),           A(k) = Σ_{q ≡ k} q f(q),
    ∂_b u(x_j) = −Σ_k e^{i k·x_j} C_b(k) × F(k),           C_b(k) = Σ_{q ≡ k} q_b q f(q),

with f(q) = e^{−|q|²σ²/2}/(L³|q|²) (0 at q = 0) the spectral sum's factor ψ̂/F, summed over
exactly the spectral sum's cube of modes |m_i| ≤ m_max: the same series, without the
non-uniform FFTs' error (≤ tol/10) and without their fine grid (8 (2 m_max + 1)³ points,
~500³ for 128³ elements at σ = h): three forward and twelve inverse FFTs of n³, A and C
(nine real n³ arrays) made once per (n, σ) on the host.  Each node's own blob is taken
out of ∇u as in :meth:`vortexsim.summation.spectral.SpectralSum.evaluate` at the elements.

The quadratic field sums of the diagnostics (:meth:`LatticeSum.field_sums`, the seven
of :meth:`vortexsim.summation.spectral.SpectralSum.field_sums`) fold the same way: each is a
quadratic form of F(k) with a folded weight (|F|² Σ g/|q|², Re(F_b F̄_c) Σ q_b q_c g/|q|⁴,
...), one forward FFT per row.

Used by the time stepper for the first stage of a step that starts on the lattice
(:class:`vortexsim.physics.rhs.VortexRHS`; the later stages' moved elements go through
the non-uniform FFTs) and for the diagnostics rows taken there
(:meth:`vortexsim.Simulation.diagnostics`).
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..backend import array_namespace, to_host
from .spectral import FIELD_SUMS, self_gradient

__all__ = ["LatticeSum"]

_PAIRS = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))   # the symmetric C's entries


class LatticeSum:
    """u and ∇u of Gaussian blobs on the periodic n³ lattice at its nodes.

    Parameters
    ----------
    spectral : :class:`vortexsim.summation.spectral.SpectralSum` (box L, core σ, tol: its series)
    n : int, lattice nodes per side (h = L/n)
    xp : numpy or cupy (where the symbols A, C live and the FFTs run)
    """

    def __init__(self, spectral, n, xp=np):
        self.spectral, self.n, self.xp = spectral, int(n), xp
        self.sigma = spectral.sigma
        a, c = _fold(spectral, self.n)
        self.a = xp.asarray(a)                  # (3, n, n, n)
        self.c = xp.asarray(c)                  # (6, n, n, n), the pairs of _PAIRS

    def evaluate(self, alpha, gradient=True):
        """u (n³, 3) [L/T] and ∇u (n³, 3, 3) [1/T] (``grad_u[j, a, b] = ∂u_a/∂x_b``, each
        node's own blob out; None without ``gradient``) at the nodes of strengths ``alpha``
        (n³, 3) [L³/T] in lattice order; float64 on the arrays' device."""
        xp, n = self.xp, self.n
        if array_namespace(alpha) is not xp:
            raise TypeError("alpha must live on the device of the lattice sum's symbols.")
        if alpha.shape != (n ** 3, 3):
            raise ValueError(f"lattice strengths must have shape ({n ** 3}, 3), got "
                             f"{tuple(alpha.shape)}.")
        alpha = xp.ascontiguousarray(alpha, dtype=xp.float64)
        f = xp.fft.fftn(alpha.reshape(n, n, n, 3), axes=(0, 1, 2))
        f = xp.moveaxis(f, -1, 0)                                   # (3, n, n, n)
        scale = float(n) ** 3                                       # Σ_k e^{ik·x_j} = n³ ifft
        u = _inverse(1j * _cross(self.a, f, xp), xp) * scale
        if not gradient:
            return u, None
        g = xp.empty((n ** 3, 3, 3), dtype=xp.float64)
        for b in range(3):
            cb = xp.stack([self.c[_PAIRS.index(tuple(sorted((b, i))))] for i in range(3)])
            g[:, :, b] = -_inverse(_cross(cb, f, xp), xp) * scale
        g -= self_gradient(alpha, self.sigma, self.spectral.order)
        return u, g

    def field_sums(self, alpha):
        """:meth:`vortexsim.summation.spectral.SpectralSum.field_sums` of the lattice strengths
        ``alpha`` (n³, 3) in lattice order (a dict of host floats, the same seven sums):
        the quadratic forms of F(k) with the folded weights of :attr:`weights`."""
        xp, n = self.xp, self.n
        f = xp.fft.fftn(xp.ascontiguousarray(alpha, dtype=xp.float64).reshape(n, n, n, 3),
                        axes=(0, 1, 2))
        f = xp.moveaxis(f, -1, 0)
        w = self.weights
        f2 = (f.real ** 2 + f.imag ** 2).sum(axis=0)

        def quad(pairs):                         # Σ_bc Re(F_b F̄_c) P_bc, P symmetric
            out = 0.0
            for i, (b, c) in enumerate(_PAIRS):
                term = (f[b] * f[c].conj()).real * pairs[i]
                out = out + (term if b == c else 2.0 * term)
            return out

        sums = xp.stack([
            0.5 * (f2 * w["e2"]).sum(), (f2 * w["z2"]).sum(),
            (1j * _cross(self.a, f, xp) * f.conj()).sum(axis=0).real.sum(),
            0.5 * (f2 * w["e2"] - quad(w["p4"])).sum(), (f2 * w["z2"] - quad(w["p2"])).sum(),
            0.5 * (f2 * w["e1"]).sum(), (f2 * w["z1"]).sum()])
        return dict(zip(FIELD_SUMS, (float(v) for v in to_host(sums))))

    @functools.cached_property
    def weights(self):
        """The folded weights of :meth:`field_sums` (on the device, made on first use):
        with g₁ = ζ̂(q)/L³ and g₂ = ζ̂(q)²/L³ (the blob field smoothed once and twice;
        ζ̂ = e^{−|q|²σ²/2} for the Gaussian), e2 = Σ g₂/|q|² (also the |q|² δ part of |q × F|² g₂/|q|⁴),
        z2 = Σ g₂, p4 = Σ q⊗q g₂/|q|⁴ and p2 = Σ q⊗q g₂/|q|² (the pairs of
        ``_PAIRS``), e1 = Σ g₁/|q|², z1 = Σ g₁; q = 0 left out of every sum with 1/|q|."""
        sp, n = self.spectral, self.n
        q, index, inv_q2 = _cube(sp, n)
        q2 = q[0] ** 2 + q[1] ** 2 + q[2] ** 2
        g1 = sp.transform(q2) / sp.box ** 3
        g2 = g1 * g1 * sp.box ** 3
        fold = functools.partial(_folded, index, n, g1.shape)
        out = dict(e2=fold(g2 * inv_q2), z2=fold(g2), e1=fold(g1 * inv_q2), z1=fold(g1),
                   p4=np.stack([fold(q[i] * q[j] * g2 * inv_q2 * inv_q2) for i, j in _PAIRS]),
                   p2=np.stack([fold(q[i] * q[j] * g2 * inv_q2) for i, j in _PAIRS]))
        return {k: self.xp.asarray(v) for k, v in out.items()}


def _cross(a, f, xp):
    """a × f over the first axis (3, ...)."""
    return xp.stack([a[1] * f[2] - a[2] * f[1], a[2] * f[0] - a[0] * f[2],
                     a[0] * f[1] - a[1] * f[0]])


def _inverse(modes, xp):
    """(n³, 3) real part of the inverse FFT of modes (3, n, n, n)."""
    v = xp.fft.ifftn(modes, axes=(1, 2, 3)).real
    return xp.ascontiguousarray(xp.moveaxis(v, 0, -1)).reshape(-1, 3)


def _cube(spectral, n):
    """The series' cube |m_i| ≤ m_max: its wave vectors q (three broadcastable axes) [1/L],
    the flat index of each mode's lattice mode m mod n (numpy's FFT order) and 1/|q|²
    (0 at q = 0)."""
    m = np.arange(-spectral.m_max, spectral.m_max + 1)
    k1 = (2.0 * math.pi / spectral.box) * m
    fold = np.mod(m, n)
    index = ((fold[:, None, None] * n + fold[None, :, None]) * n + fold[None, None, :]).ravel()
    q = (k1[:, None, None], k1[None, :, None], k1[None, None, :])
    q2 = q[0] ** 2 + q[1] ** 2 + q[2] ** 2
    with np.errstate(divide="ignore"):
        inv_q2 = np.where(q2 > 0, 1.0 / np.where(q2 > 0, q2, 1.0), 0.0)
    return q, index, inv_q2


def _folded(index, n, shape, values):
    """Σ of ``values`` (broadcast to the cube ``shape``) over the modes of each lattice mode:
    (n, n, n), on the host (bincount: a fixed order, deterministic)."""
    return np.bincount(index, weights=np.broadcast_to(values, shape).ravel(),
                       minlength=n ** 3).reshape(n, n, n)


def _fold(spectral, n):
    """A (3, n, n, n) and C (6, n, n, n) of the module docstring, on the host: the series'
    cube |m_i| ≤ m_max folded onto the lattice modes m mod n."""
    q, index, _ = _cube(spectral, n)
    factor = spectral.factor                                    # (2m+1)³, 0 at q = 0
    fold = functools.partial(_folded, index, n, factor.shape)
    a = np.stack([fold(q[i] * factor) for i in range(3)])
    c = np.stack([fold(q[i] * q[j] * factor) for i, j in _PAIRS])
    return a, c
