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

Cost: one real FFT pair of each of the three components per remeshing
(:mod:`vortexsim.geometry.lattice_modes`, NumPy or CuPy by the arrays' module; cuFFT is
deterministic, so bitwise restarts hold).
"""
from __future__ import annotations

import math

from ..backend import array_namespace
from ..geometry.lattice_modes import (column_modes, columns_from_modes,
                                      half_spectrum_weight, wavenumbers)

__all__ = ["project_solenoidal", "divergent_fraction"]


def _lattice_modes(alpha, n):
    """The half spectra of the three columns of the lattice strengths, the integer
    wavenumbers κ as three broadcast vectors with the Nyquist components zeroed, |κ|²
    (zeros replaced by 1) and the array module."""
    xp = array_namespace(alpha)
    if alpha.ndim != 2 or alpha.shape != (n ** 3, 3):
        raise ValueError(f"lattice strengths must have shape ({n ** 3}, 3) for n = {n}, got "
                         f"{tuple(alpha.shape)} (the periodic remeshing's n³ nodes).")
    modes = column_modes(alpha, n, xp)
    kk = wavenumbers(n, 2 * math.pi, xp, derivative=True)       # the integers κ
    k2 = kk[0] ** 2 + kk[1] ** 2 + kk[2] ** 2
    k2 = xp.where(k2 == 0, 1.0, k2)          # κ = 0 and the modes whose κ is all Nyquist
    return modes, kk, k2, xp


def project_solenoidal(alpha, n):
    """α (n³, 3) [L³/T] on the periodic lattice (remesh order) projected onto divergence-free
    fields with zero sum; same shape, dtype and device."""
    modes, kk, k2, xp = _lattice_modes(alpha, n)
    div = (kk[0] * modes[0] + kk[1] * modes[1] + kk[2] * modes[2]) / k2
    for c in range(3):
        modes[c] -= kk[c] * div
        modes[c][0, 0, 0] = 0.0
    del div
    return columns_from_modes(modes, n, alpha.dtype, xp)


def divergent_fraction(alpha, n):
    """Σ|κ·α̂|²/|κ|² over Σ|α̂|² of the lattice strengths (n³, 3): the share of the divergent
    part in Σ|α|² (0 for a solenoidal field; a host float).  Over the half spectra, each
    mode of 0 < κ_z < n/2 counted twice for its conjugate."""
    modes, kk, k2, xp = _lattice_modes(alpha, n)
    weight = half_spectrum_weight(n, xp)
    div = ((xp.abs(kk[0] * modes[0] + kk[1] * modes[1] + kk[2] * modes[2]) ** 2 / k2)
           * weight).sum()
    total = sum(((xp.abs(m) ** 2) * weight).sum() for m in modes)
    return float(div / total) if float(total) > 0 else 0.0
