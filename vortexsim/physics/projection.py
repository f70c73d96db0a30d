r"""Solenoidal projection of lattice strengths in the periodic box.

A remeshed periodic run holds its elements on the n³ lattice of spacing h = L/n, node
(i, j, k) in row (i·n + j)·n + k (:mod:`vortexsim.geometry.remesh`).  Its strengths
α_p [L³/T] define the lattice vorticity field, whose discrete Fourier modes are

    α̂(k) = Σ_p α_p e^{−i k·x_p},   k = (2π/L) κ,  κ_a ∈ {−n/2 … n/2 − 1}.

The velocity sees only the solenoidal part of the vorticity (û ∝ k × ω̂), but the
stretching term acts on all of α, and a vortex method with smoothed velocity (blobs of
core σ) does not keep ∇·α = 0: the difference between α and its smoothed field feeds the
divergent part (for the transpose scheme at a rate ∇·(α × ω_σ)), and the divergent part
in turn feeds energy into the resolved scales (``docs/periodic.md``, "The Taylor–Green
case").  :func:`project_solenoidal` removes it after each remeshing:

    α̂(k) ← α̂(k) − k (k·α̂(k)) / |k|²   (k ≠ 0),      α̂(0) ← 0,

with the Nyquist component of k set to zero (a real field has no derivative there), so the
result is divergence-free in the lattice's spectral sense to round-off and has Σα = 0.
What the spectral sum computes from the lattice (u and ∇u of the principal modes) does
not change; only the aliases' share, weighted by e^{−|k|²σ²/2} ≤ e^{−π²σ²/(2h²)}, does.

Cost: two 3-D FFTs of (n, n, n, 3) per remeshing (NumPy or CuPy by the arrays' module;
cuFFT is deterministic, so bitwise restarts hold).
"""
from __future__ import annotations

from ..backend import array_namespace

__all__ = ["project_solenoidal", "divergent_fraction"]


def _lattice_modes(alpha, n):
    """The (n, n, n, 3) DFT of the lattice strengths and the integer wavenumbers κ (n, n, n, 3)
    with the Nyquist component zeroed, |κ|² (zeros replaced by 1) and the array module."""
    xp = array_namespace(alpha)
    if alpha.ndim != 2 or alpha.shape != (n ** 3, 3):
        raise ValueError(f"lattice strengths must have shape ({n ** 3}, 3) for n = {n}, got "
                         f"{tuple(alpha.shape)} (the periodic remeshing's n³ nodes).")
    field = alpha.reshape(n, n, n, 3)
    modes = xp.fft.fftn(field, axes=(0, 1, 2))
    k = xp.fft.fftfreq(n, d=1.0 / n)
    if n % 2 == 0:
        k[n // 2] = 0.0
    kk = xp.stack(xp.meshgrid(k, k, k, indexing="ij"), axis=-1)
    k2 = (kk * kk).sum(axis=-1)
    k2 = xp.where(k2 == 0, 1.0, k2)
    return modes, kk, k2, xp


def project_solenoidal(alpha, n):
    """α (n³, 3) [L³/T] on the periodic lattice (remesh order) projected onto divergence-free
    fields with zero sum; same shape, dtype and device."""
    modes, kk, k2, xp = _lattice_modes(alpha, n)
    modes -= kk * ((kk * modes).sum(axis=-1) / k2)[..., None]
    modes[0, 0, 0] = 0.0
    out = xp.fft.ifftn(modes, axes=(0, 1, 2)).real
    return xp.ascontiguousarray(out.reshape(n ** 3, 3)).astype(alpha.dtype, copy=False)


def divergent_fraction(alpha, n):
    """Σ|κ·α̂|²/|κ|² over Σ|α̂|² of the lattice strengths (n³, 3): the share of the divergent
    part in Σ|α|² (0 for a solenoidal field; a host float)."""
    modes, kk, k2, xp = _lattice_modes(alpha, n)
    div = (xp.abs((kk * modes).sum(axis=-1)) ** 2 / k2).sum()
    total = (xp.abs(modes) ** 2).sum()
    return float(div / total) if float(total) > 0 else 0.0
