r"""The vortex-ring cases: single ring, leapfrogging, head-on and oblique collisions, ring
hitting the ground.

Every case builds its rings with :func:`vortexsim.cases.rings.vortex_ring` (Gaussian core
σ_c = ``core`` discretized in ``layers`` concentric layers of ``n_phi`` stations; element
core ``sigma``, by default the larger of the station spacing 2πR/n_phi and the layer
spacing) and seeds ``tracers_per_ring`` passive tracers around each ring, as the papers
do ("fluid particles generated randomly around the rings"): uniform around the ring,
Gaussian of width ``tracer_spread`` [L] across it, from a seeded generator (``seed``).

The defaults are small enough for a 2-core CPU (each default case runs to its t_end in
about a minute with the direct sum).  For the GPU sizes of the papers pass, e.g.,
``n_phi=2341, layers=2`` (2 rings: 32 774 elements) and ``tracers_per_ring=2**19``
with ``method="fmm"``.

Geometry (Γ > 0 moves a ring along its axis n̂):

=====================  ===================================================================
case                   set-up
=====================  ===================================================================
single_ring            one ring, centre 0, axis +z
leapfrog               two coaxial rings (axis +z) of equal Γ, the rear at z = 0, the front
                       at z = ``spacing``
collision              head-on: ring at z = +spacing/2 moving −z and its mirror image at
                       z = −spacing/2 moving +z (opposite Γ about the common axis); the lower
                       ring and its tracers are the exact images of the upper ones
                       (``geometry.mirror``), so the run is mirror-symmetric about z = 0
oblique_collision      two rings side by side, centres x = ∓separation/2, axes tilted
                       toward each other by ``angle`` degrees from +z, both moving up
ring_ground            one ring, centre at ``height`` above the ground plane z = 0, moving
                       −z toward it (boundary="ground"); equal to the upper ring of
                       ``collision`` with spacing = 2·height
=====================  ===================================================================
"""
from __future__ import annotations

import math

import numpy as np

from ..geometry import mirror
from ..state import ElementGroup
from .registry import CaseSetup, register_case
from .rings import vortex_ring

#: the ring cases' units (the files' length_unit and time_unit): lengths in units of the
#: ring radius given as ``radius``, times in R^2/Gamma with ``circulation`` Gamma
RING_UNITS = ("L, the unit of radius (R = radius L; the defaults make L = R)",
              "T, with circulation Gamma in L^2/T (the defaults make T = R^2/Gamma)")

__all__ = ["ring_tracers", "single_ring", "leapfrog", "collision", "oblique_collision",
           "ring_ground"]


def _frame(axis):
    n_hat = np.asarray(axis, dtype=float)
    n_hat = n_hat / np.linalg.norm(n_hat)
    trial = np.array([1.0, 0.0, 0.0]) if abs(n_hat[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    e1 = np.cross(n_hat, trial)
    e1 /= np.linalg.norm(e1)
    return e1, np.cross(n_hat, e1), n_hat


def ring_tracers(n, radius, centre, axis, spread, rng):
    """``n`` tracer positions (n, 3) [L] around a ring: angle uniform, offsets across the
    ring Gaussian with standard deviation ``spread`` [L] in both directions."""
    if int(n) != n or n < 0:
        raise ValueError(f"the number of tracers must be an integer >= 0, got {n!r}.")
    if not spread >= 0:
        raise ValueError(f"tracer_spread must be >= 0, got {spread!r}.")
    e1, e2, n_hat = _frame(axis)
    phi = 2 * math.pi * rng.random(int(n))
    off = rng.normal(scale=spread, size=(int(n), 2)) if spread > 0 else np.zeros((int(n), 2))
    er = np.cos(phi)[:, None] * e1 + np.sin(phi)[:, None] * e2
    return (np.asarray(centre, float) + (radius + off[:, :1]) * er + off[:, 1:] * n_hat)


def _ring(radius, circulation, centre, axis, core, n_phi, layers, sigma, layer_spacing):
    return vortex_ring(radius=radius, circulation=circulation, centre=centre, axis=axis,
                       core=core, n_phi=n_phi, layers=layers, sigma=sigma,
                       layer_spacing=layer_spacing)


def _assemble(rings, tracers, names, circulations, axes, resolved_sigma):
    xs, alphas, sigmas, groups, start = [], [], [], [], 0
    for (x, a, s), name, gamma, axis in zip(rings, names, circulations, axes):
        xs.append(x)
        alphas.append(a)
        sigmas.append(s)
        groups.append(ElementGroup(name, start, start + len(x), float(gamma),
                                   tuple(float(v) for v in axis)))
        start += len(x)
    tracers = np.concatenate(tracers) if tracers else np.zeros((0, 3))
    return CaseSetup(np.concatenate(xs), np.concatenate(alphas), np.concatenate(sigmas),
                     tracers, groups, {"sigma": float(resolved_sigma)})


@register_case("single_ring", units=RING_UNITS, dt=0.05, t_end=5.0)
def single_ring(radius=1.0, circulation=1.0, core=0.1, n_phi=48, layers=2, sigma=None,
                layer_spacing=1.0, tracers_per_ring=512, tracer_spread=0.25, seed=0):
    """One vortex ring (centre 0, axis +z) with tracers around it."""
    ring = _ring(radius, circulation, (0, 0, 0), (0, 0, 1), core, n_phi, layers, sigma,
                 layer_spacing)
    rng = np.random.default_rng(seed)
    tr = ring_tracers(tracers_per_ring, radius, (0, 0, 0), (0, 0, 1), tracer_spread, rng)
    return _assemble([ring], [tr], ["ring"], [circulation], [(0, 0, 1)], ring[2][0])


@register_case("leapfrog", units=RING_UNITS, dt=0.1, t_end=20.0)
def leapfrog(radius=1.0, circulation=1.0, core=0.1, spacing=1.0, n_phi=32, layers=2,
             sigma=None, layer_spacing=1.0, tracers_per_ring=512, tracer_spread=0.25, seed=0):
    """Two coaxial rings of equal Γ, ``spacing`` apart along +z: they leapfrog."""
    if not spacing > 0:
        raise ValueError(f"spacing must be > 0, got {spacing!r}.")
    rng = np.random.default_rng(seed)
    rings, trs = [], []
    for z in (0.0, float(spacing)):
        rings.append(_ring(radius, circulation, (0, 0, z), (0, 0, 1), core, n_phi, layers,
                           sigma, layer_spacing))
        trs.append(ring_tracers(tracers_per_ring, radius, (0, 0, z), (0, 0, 1),
                                tracer_spread, rng))
    return _assemble(rings, trs, ["rear", "front"], [circulation] * 2, [(0, 0, 1)] * 2,
                     rings[0][2][0])


def _upper_ring(radius, circulation, height, core, n_phi, layers, sigma, layer_spacing,
                tracers_per_ring, tracer_spread, seed, z0=0.0):
    """The ring at z0 + height moving −z, and its tracers (folded into z ≥ z0)."""
    centre = (0.0, 0.0, z0 + float(height))
    ring = _ring(radius, circulation, centre, (0, 0, -1), core, n_phi, layers, sigma,
                 layer_spacing)
    tr = ring_tracers(tracers_per_ring, radius, centre, (0, 0, -1), tracer_spread,
                      np.random.default_rng(seed))
    below = tr[:, 2] < z0
    tr[below, 2] = 2 * z0 - tr[below, 2]
    return ring, tr


@register_case("collision", units=RING_UNITS, dt=0.05, t_end=8.0)
def collision(radius=1.0, circulation=1.0, core=0.1, spacing=3.0, n_phi=48, layers=2,
              sigma=None, layer_spacing=1.0, tracers_per_ring=256, tracer_spread=0.25, seed=0):
    """Head-on collision of two coaxial rings moving toward each other (mirror images)."""
    if not spacing > 0:
        raise ValueError(f"spacing must be > 0, got {spacing!r}.")
    (x, a, s), tr = _upper_ring(radius, circulation, 0.5 * spacing, core, n_phi, layers, sigma,
                                layer_spacing, tracers_per_ring, tracer_spread, seed)
    x_low, a_low = mirror(x, a)
    tr_low, _ = mirror(tr, np.zeros_like(tr))
    return _assemble([(x, a, s), (x_low, a_low, s.copy())], [tr, tr_low], ["upper", "lower"],
                     [circulation, circulation], [(0, 0, -1), (0, 0, 1)], s[0])


@register_case("oblique_collision", units=RING_UNITS, dt=0.05, t_end=10.0)
def oblique_collision(radius=1.0, circulation=1.0, core=0.1, separation=2.5, angle=15.0,
                      n_phi=48, layers=2, sigma=None, layer_spacing=1.0, tracers_per_ring=256,
                      tracer_spread=0.25, seed=0):
    """Two rings side by side (x = ∓separation/2), axes tilted toward each other by ``angle``°."""
    if not separation > 0:
        raise ValueError(f"separation must be > 0, got {separation!r}.")
    if not 0 <= angle < 90:
        raise ValueError(f"angle must be in [0, 90) degrees, got {angle!r}.")
    th = math.radians(angle)
    rng = np.random.default_rng(seed)
    rings, trs, axes = [], [], []
    for side in (-1.0, 1.0):
        centre = (0.5 * side * separation, 0.0, 0.0)
        axis = (-side * math.sin(th), 0.0, math.cos(th))
        rings.append(_ring(radius, circulation, centre, axis, core, n_phi, layers, sigma,
                           layer_spacing))
        trs.append(ring_tracers(tracers_per_ring, radius, centre, axis, tracer_spread, rng))
        axes.append(axis)
    return _assemble(rings, trs, ["left", "right"], [circulation] * 2, axes, rings[0][2][0])


@register_case("ring_ground", units=RING_UNITS, dt=0.05, t_end=8.0,
               boundary="ground")
def ring_ground(radius=1.0, circulation=1.0, core=0.1, height=1.5, n_phi=48, layers=2,
                sigma=None, layer_spacing=1.0, tracers_per_ring=256, tracer_spread=0.25,
                seed=0):
    """One ring moving −z toward the ground plane z = 0 (images), from ``height`` above it."""
    if not height > 0:
        raise ValueError(f"height must be > 0, got {height!r}.")
    (x, a, s), tr = _upper_ring(radius, circulation, height, core, n_phi, layers, sigma,
                                layer_spacing, tracers_per_ring, tracer_spread, seed)
    return _assemble([(x, a, s)], [tr], ["ring"], [circulation], [(0, 0, -1)], s[0])
