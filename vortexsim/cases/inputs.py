"""Standard inputs of the benchmarks and tests (``benchmarks.md``), from a seeded Generator.

Every function returns ``(x, alpha, tracers)``: element positions (N, 3) [L], vector
strengths (N, 3) [L³/T], and tracer positions (M, 3) or None.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["uniform", "rings", "clustered"]


def uniform(n, rng):
    """N points uniform in the unit cube, alpha ~ N(0, 1)³."""
    return rng.random((n, 3)), rng.normal(size=(n, 3)), None


def rings(n, m, rng, *, radius=0.3, core=0.03, centres_z=(0.35, 0.65), cloud=0.15):
    """Coaxial rings (axis z through (0.5, 0.5)) with elements in Gaussian cores, plus tracers.

    ``n`` elements split evenly over the rings (radius, core width ``core`` [L]) with
    α = Γ (2πR / n_ring) t̂ (Γ = 1), and ``m`` tracers in a Gaussian cloud of width
    ``cloud`` about the cube centre, clipped to the unit cube.
    """
    per = n // len(centres_z)
    xs, alphas = [], []
    for z0 in centres_z:
        phi = 2 * math.pi * rng.random(per)
        s = rng.normal(scale=core, size=(per, 2))
        rad = radius + s[:, 0]
        xs.append(np.stack([0.5 + rad * np.cos(phi), 0.5 + rad * np.sin(phi), z0 + s[:, 1]], 1))
        tangent = np.stack([-np.sin(phi), np.cos(phi), 0 * phi], 1)
        alphas.append(tangent * (2 * math.pi * radius / per))
    tracers = np.clip(0.5 + rng.normal(scale=cloud, size=(m, 3)), 0.0, 1.0)
    return np.concatenate(xs), np.concatenate(alphas), tracers


def clustered(n, rng, scale=0.05):
    """Plummer sphere of scale ``scale`` about the cube centre, clipped to the unit cube."""
    r = scale / np.sqrt(rng.random(n) ** (-2 / 3) - 1)
    v = rng.normal(size=(n, 3))
    v /= np.linalg.norm(v, axis=1)[:, None]
    return np.clip(0.5 + r[:, None] * v, 0.0, 1.0), rng.normal(size=(n, 3)), None
