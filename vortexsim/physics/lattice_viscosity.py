r"""Viscous diffusion on the periodic remeshing lattice, exact in Fourier space.

``viscous = "lattice"`` (periodic box, remeshing every step).  Between two remeshings the
elements sit on the n³ lattice of spacing h = L/n, node (i, j, k) in row (i·n + j)·n + k
(:mod:`vortexsim.geometry.remesh`), and their strengths are the lattice vorticity
ω = α/h³.  There the heat equation ∂ω/∂t = ν∇²ω is solved exactly for its Fourier modes,

    α̂(k) ← α̂(k) e^{−ν|k|²τ},   k = (2π/L) κ,  κ_a ∈ {−n/2 … n/2 − 1},

and the step is split symmetrically (Strang): half a step of diffusion, the inviscid
particle step (advection and stretching, :class:`vortexsim.physics.rhs.VortexRHS` with no
viscous term), the remeshing (and projection), half a step of diffusion: the hooks
``before_step`` and ``after_step`` of the term
:class:`vortexsim.physics.terms.LatticeDiffusion`, which
:meth:`vortexsim.model.VortexModel.time_step` calls around the particle step.  The
splitting is second order in dt; the diffusion itself has no error in h: particle
strength exchange on the same lattice (``viscous = "pse"``) damps a mode of wavenumber k
at ν|k|² times its symbol's ratio, which falls off at large kσ (order 4 with ε = σ/√2 = h/√2: 0.95 at k h = 0.8, 0.70 at 1.5), so that a
run with PSE keeps too much energy at the smallest resolved scales; the lattice diffusion
dissipates each mode at exactly ν|k|² (``docs/periodic.md``).

Σα (the k = 0 mode) is kept to round-off.  Cost: one real FFT pair of each of the three
components per half step (:mod:`vortexsim.geometry.lattice_modes`, NumPy or CuPy by the
arrays' module; cuFFT is deterministic: bitwise restarts hold).
"""
from __future__ import annotations

import math

from ..backend import array_namespace
from ..geometry.lattice_modes import column_modes, columns_from_modes, wavenumbers

__all__ = ["diffuse_lattice"]


def diffuse_lattice(alpha, n, box, nu, tau):
    """The lattice strengths α (n³, 3) [L³/T] (remesh order) after diffusing for a time
    ``tau`` [T] with viscosity ``nu`` [L²/T] in the periodic box of edge ``box`` [L]:
    α̂(k) e^{−ν|k|²τ} for every lattice mode; a new array of the same shape, dtype and
    device (α itself when ν τ = 0)."""
    xp = array_namespace(alpha)
    n = int(n)
    if alpha.ndim != 2 or alpha.shape != (n ** 3, 3):
        raise ValueError(f"lattice strengths must have shape ({n ** 3}, 3) for n = {n}, got "
                         f"{tuple(alpha.shape)} (the periodic remeshing's n³ nodes).")
    if not (math.isfinite(nu) and nu >= 0 and math.isfinite(tau) and tau >= 0):
        raise ValueError(f"nu = {nu!r} and tau = {tau!r} must be finite and >= 0.")
    if nu * tau == 0.0:
        return alpha
    kx, ky, kz = wavenumbers(n, box, xp)
    damping = xp.exp(-(nu * tau) * (kx ** 2 + ky ** 2 + kz ** 2))
    modes = column_modes(alpha, n, xp)
    for m in modes:
        m *= damping
    del damping
    return columns_from_modes(modes, n, alpha.dtype, xp)
