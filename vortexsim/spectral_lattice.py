r"""The spectral sum at the nodes of the periodic lattice, by plain FFTs.

After a periodic remeshing the elements sit on the n³ lattice x_j = j h, h = L/n, node
(i, j, k) in row (i·n + j)·n + k (:mod:`vortexsim.physics.remesh`).  There the Fourier
series of :mod:`vortexsim.spectral` folds onto the lattice's own modes: every wave vector
q = (2π/L) m of the series is k + (2π/L) n a for one principal k (m mod n) and an alias a,
e^{i q·x_j} = e^{i k·x_j} and F(q) = Σ_p α_p e^{−i q·x_p} = F(k), so

    u(x_j)     = Σ_k e^{i k·x_j} i A(k) × F(k),           A(k) = Σ_{q ≡ k} q f(q),
    ∂_b u(x_j) = −Σ_k e^{i k·x_j} C_b(k) × F(k),           C_b(k) = Σ_{q ≡ k} q_b q f(q),

with f(q) = e^{−|q|²σ²/2}/(L³|q|²) (0 at q = 0) the spectral sum's factor ψ̂/F, summed over
exactly the spectral sum's cube of modes |m_i| ≤ m_max: the same series, without the
non-uniform FFTs' error (≤ tol/10) and without their fine grid (8 (2 m_max + 1)³ points,
~500³ for 128³ elements at σ = h): three forward and twelve inverse FFTs of n³, A and C
(nine real n³ arrays) made once per (n, σ) on the host.  Each node's own blob is taken
out of ∇u as in :meth:`vortexsim.spectral.SpectralSum.evaluate` at the elements.

Used by the time stepper for the first stage of a step that starts on the lattice
(:class:`vortexsim.physics.rhs.VortexRHS`): the later stages' moved elements go through
the non-uniform FFTs.
"""
from __future__ import annotations

import math

import numpy as np

from .backend import array_namespace
from .spectral import self_gradient

__all__ = ["LatticeSum"]

_PAIRS = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))   # the symmetric C's entries


class LatticeSum:
    """u and ∇u of Gaussian blobs on the periodic n³ lattice at its nodes.

    Parameters
    ----------
    spectral : :class:`vortexsim.spectral.SpectralSum` (box L, core σ, tol: its series)
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
        g -= self_gradient(alpha, self.sigma)
        return u, g


def _cross(a, f, xp):
    """a × f over the first axis (3, ...)."""
    return xp.stack([a[1] * f[2] - a[2] * f[1], a[2] * f[0] - a[0] * f[2],
                     a[0] * f[1] - a[1] * f[0]])


def _inverse(modes, xp):
    """(n³, 3) real part of the inverse FFT of modes (3, n, n, n)."""
    v = xp.fft.ifftn(modes, axes=(1, 2, 3)).real
    return xp.ascontiguousarray(xp.moveaxis(v, 0, -1)).reshape(-1, 3)


def _fold(spectral, n):
    """A (3, n, n, n) and C (6, n, n, n) of the module docstring, on the host: the series'
    cube |m_i| ≤ m_max folded onto the lattice modes m mod n (numpy's FFT order)."""
    m_max = spectral.m_max
    m = np.arange(-m_max, m_max + 1)
    k1 = (2.0 * math.pi / spectral.box) * m
    fold = np.mod(m, n)
    index = ((fold[:, None, None] * n + fold[None, :, None]) * n + fold[None, None, :]).ravel()
    factor = spectral.factor                                    # (2m+1)³, 0 at q = 0
    q = (k1[:, None, None], k1[None, :, None], k1[None, None, :])
    size = n ** 3

    def folded(values):
        return np.bincount(index, weights=np.broadcast_to(values, factor.shape).ravel(),
                           minlength=size).reshape(n, n, n)

    a = np.stack([folded(q[i] * factor) for i in range(3)])
    c = np.stack([folded(q[i] * q[j] * factor) for i, j in _PAIRS])
    return a, c
