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
"""
from __future__ import annotations

import math

from .backend import array_namespace

__all__ = ["total_vorticity", "linear_impulse", "angular_impulse", "ring_centre",
           "ring_radius"]


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
