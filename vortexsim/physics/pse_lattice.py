r"""PSE on the periodic lattice, by FFT convolutions.

On the periodic n³ lattice of spacing h = L/n (the remeshed elements, node (i, j, k) in
row (i·n + j)·n + k) the pair sum of :func:`vortexsim.physics.pse.pse_rate`,

    dα_p/dt = C Σ_q (V_p α_q − V_q α_p) w(|x_p − x_q|/ε),   C = ν ε⁻⁵ (4π)^{−3/2},

over the pairs closer than the reach (minimum image; the box holds twice the reach, so a
pair meets at most one image), is a circular convolution with the lattice kernel
K_j = w(|j_c| h/ε) (j_c the offset j mod n centred on 0, K_j = 0 beyond the reach):

    dα_p/dt = C [V_p (K ⊛ α)_p − α_p (K ⊛ V)_p].

Four real FFT convolutions of n³ instead of ~14 (w/h)³ pair terms per element, the same
pairs and weights (round-off apart; K is even, so Σ_p dα_p/dt = 0 to round-off).  K's
transform is made once per (n, L, ε, ν, tol, order).  NumPy or CuPy by the arrays.
"""
from __future__ import annotations

import functools

import numpy as np

from ..backend import array_namespace
from .pse_common import (PSE_NORM, PSE_TOL, check_pse_box, check_viscosity, check_positive_length,
                         check_pse_order, pse_constant, pse_kernel, pse_reach)

__all__ = ["pse_rate_lattice"]


def pse_rate_lattice(alpha, volume, n, box, epsilon, nu, *, tol=PSE_TOL, order=2):
    """:func:`vortexsim.physics.pse.pse_rate` of the elements on the periodic n³ lattice.

    alpha (n³, 3) [L³/T] and volume (n³,) [L³] (or a float) in lattice order; box L [L];
    epsilon [L], nu [L²/T], tol and order as there.  Returns dα/dt (n³, 3) float64
    [L³/T²] on the arrays' device."""
    order = check_pse_order(order)
    xp = array_namespace(alpha)
    n = int(n)
    if alpha.shape != (n ** 3, 3):
        raise ValueError(f"lattice strengths must have shape ({n ** 3}, 3), got "
                         f"{tuple(alpha.shape)}.")
    # the pair sum's checks of ε, ν and the box against the reach
    epsilon = check_positive_length("epsilon", epsilon)
    nu = check_viscosity(nu)
    reach = pse_reach(epsilon, tol, order)
    box = check_pse_box(box, reach, epsilon, tol, order)
    if nu == 0.0:
        return xp.zeros((n ** 3, 3))
    k_hat = xp.asarray(_kernel_transform(n, float(box), float(epsilon), float(reach),
                                          order))
    v = xp.broadcast_to(xp.asarray(volume, dtype=xp.float64), (n ** 3,))
    fields = xp.concatenate([xp.asarray(alpha, dtype=xp.float64), v[:, None]], axis=1)
    f = xp.fft.rfftn(fields.reshape(n, n, n, 4), axes=(0, 1, 2))
    conv = xp.fft.irfftn(f * k_hat[..., None], s=(n, n, n), axes=(0, 1, 2)).reshape(-1, 4)
    rate = v[:, None] * conv[:, :3] - fields[:, :3] * conv[:, 3:]
    return rate * pse_constant(epsilon, nu)


@functools.lru_cache(maxsize=8)
def _kernel_transform(n, box, epsilon, reach, order):
    """rfftn of the lattice kernel K (n, n, n//2+1), on the host: w(ρ) = η(ρ)/(4π)^{−3/2}
    at the centred offsets, 0 at and beyond the reach (the pair sum keeps r² < reach²)."""
    h = box / n
    j = np.arange(n)
    j = np.where(j < (n + 1) // 2, j, j - n).astype(np.float64) * h    # centred offsets
    r2 = j[:, None, None] ** 2 + j[None, :, None] ** 2 + j[None, None, :] ** 2
    w = pse_kernel(np.sqrt(r2) / epsilon, np, order) / PSE_NORM
    w = np.where(r2 < reach * reach, w, 0.0)
    return np.fft.rfftn(w)
