r"""Vortex-ring discretization (``physics.md``, "Vortex rings").

A ring of radius R, circulation Γ, centre c and unit axis n̂ has a Gaussian core:
vorticity ∝ exp(−s²/(2σ_c²)) in the cross-section (s = distance from the centre
line).  It is discretized by N_φ stations around the ring and, in each
cross-section, concentric circles ("layers") of points: layer 0 is the centre
line, layer l ≥ 1 has 6l points at radius l·Δ, Δ = ``layer_spacing``·σ_c.  Each
cross-section point j carries the circulation fraction w_j ∝ exp(−s_j²/(2σ_c²)) ×
(its cell's area), normalised so that Σ_j w_j = 1, and the element at (φ, j) gets

    α = Γ w_j · (2π (R + s_j,r) / N_φ) · t̂(φ)

(vorticity × volume of its cell of the torus).  With σ_c = 0 the ring is a single
layer and the core is the elements' own blob σ.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["vortex_ring", "cross_section", "core_summary"]


def cross_section_size(core, layers):
    """The number of points of :func:`cross_section` without making them: 1 for a core of
    0 or one layer, else 1 + Σ_{l<L} 6 l = 1 + 3 L (L − 1)."""
    if core == 0 or layers == 1:
        return 1
    return 1 + 3 * layers * (layers - 1)


def cross_section(core, layers, layer_spacing=1.0):
    """Points (J, 2) [L] of one core cross-section (radial, axial offsets) and weights (J,).

    Weights are Gaussian in s times the cell area, normalised to sum 1.
    """
    if core == 0 or layers == 1:
        return np.zeros((1, 2)), np.ones(1)
    delta = layer_spacing * core
    pts, area = [np.zeros(2)], [math.pi * (0.5 * delta) ** 2]
    for layer in range(1, layers):
        n = 6 * layer
        theta = 2 * math.pi * (np.arange(n) + 0.5 * (layer % 2)) / n
        pts.extend(layer * delta * np.stack([np.cos(theta), np.sin(theta)], axis=1))
        area.extend([2 * math.pi * layer * delta ** 2 / n] * n)
    pts = np.array(pts)
    w = np.array(area) * np.exp(-(pts ** 2).sum(axis=1) / (2 * core ** 2))
    return pts, w / w.sum()


def vortex_ring(radius=1.0, circulation=1.0, centre=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0),
                core=0.1, n_phi=64, layers=3, sigma=None, layer_spacing=1.0, phase=0.0):
    """Elements of one vortex ring.

    Parameters
    ----------
    radius : float [L], R > 0
    circulation : float [L²/T], Γ (its sign sets the direction of travel along ±n̂)
    centre : (3,) [L]
    axis : (3,), direction n̂ of the ring's axis (normalised here)
    core : float [L], σ_c ≥ 0, Gaussian core width (0: a single layer)
    n_phi : int ≥ 3, stations around the ring
    layers : int ≥ 1, concentric circles across the core (ignored when core = 0)
    sigma : float [L], element core radius; default: the spacing 2πR/n_phi, or
        Δ = layer_spacing·σ_c when that is larger
    layer_spacing : float, Δ/σ_c
    phase : float, rotation of the stations about the axis [rad]

    Returns
    -------
    x (N, 3) [L], alpha (N, 3) [L³/T], sigma (N,) [L], with N = n_phi · (1 + 3 L (L − 1))
    for L layers.
    """
    if not radius > 0:
        raise ValueError(f"radius must be > 0, got {radius!r}.")
    if not core >= 0 or core >= radius:
        raise ValueError(f"core must be in [0, radius), got core={core!r}, radius={radius!r}.")
    if int(n_phi) != n_phi or n_phi < 3:
        raise ValueError(f"n_phi must be an integer ≥ 3, got {n_phi!r}.")
    if int(layers) != layers or layers < 1:
        raise ValueError(f"layers must be an integer ≥ 1, got {layers!r}.")
    n_hat = np.asarray(axis, dtype=float)
    if n_hat.shape != (3,) or not np.linalg.norm(n_hat) > 0:
        raise ValueError(f"axis must be a non-zero 3-vector, got {axis!r}.")
    n_hat = n_hat / np.linalg.norm(n_hat)
    centre = np.asarray(centre, dtype=float)
    if centre.shape != (3,):
        raise ValueError(f"centre must be a 3-vector, got {centre!r}.")
    # orthonormal frame (e1, e2, n̂)
    trial = np.array([1.0, 0.0, 0.0]) if abs(n_hat[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = np.cross(n_hat, trial)
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(n_hat, e1)
    pts, w = cross_section(core, int(layers), layer_spacing)
    phi = phase + 2 * math.pi * np.arange(int(n_phi)) / n_phi
    er = np.cos(phi)[:, None] * e1 + np.sin(phi)[:, None] * e2          # (n_phi, 3)
    et = -np.sin(phi)[:, None] * e1 + np.cos(phi)[:, None] * e2
    rad = radius + pts[:, 0]                                             # (J,)
    x = (centre + rad[None, :, None] * er[:, None, :]
         + pts[None, :, 1, None] * n_hat[None, None, :]).reshape(-1, 3)
    alpha = (circulation * w[None, :, None] * (2 * math.pi * rad[None, :, None] / n_phi)
             * et[:, None, :]).reshape(-1, 3)
    if sigma is None:
        sigma = max(2 * math.pi * radius / n_phi, layer_spacing * core if layers > 1 else 0.0)
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma!r}.")
    return x, alpha, np.full(len(x), float(sigma))


def core_summary(config):
    """What core a ring case simulates, from its config (``sim.config``): the physical
    core σ_c (``core``), the element core σ (``sigma``) and the effective core
    σ_eff = √(σ_c² + σ²) [L] (a Gaussian core of σ_c carried by Gaussian blobs of σ has
    the vorticity of a core of σ_eff).  Returns ``(text, resolved)``, ``resolved`` False
    when σ > σ_c (the blobs, not the physical core, set the core), or None when the
    config has no numeric ``core`` and ``sigma``."""
    core, sigma = config.get("core"), config.get("sigma")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (core, sigma)):
        return None
    eff = math.sqrt(core * core + sigma * sigma)
    text = (f"cores: physical sigma_c = {core:.4g}, element sigma = {sigma:.4g}, effective "
            f"sqrt(sigma_c^2 + sigma^2) = {eff:.4g}")
    return text, sigma <= core
