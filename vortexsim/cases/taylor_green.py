r"""The Taylor–Green vortex in the periodic box [0, 2π)³ (``physics.md``, "Analytic checks").

    u = (sin x cos y cos z, −cos x sin y cos z, 0),
    ω = ∇ × u = (−cos x sin y sin z, −sin x cos y sin z, 2 sin x sin y cos z),

U = 1, k = 1, Re = 1/ν, E₀ = ½⟨|u|²⟩ = 1/8.  The elements sit on the n³ lattice x = (i, j, k) h,
h = 2π/n, with strengths α = ω(x) h³, volumes h³ and cores σ = ``overlap`` × h; they are
remeshed onto the same lattice every step (the lattice spacing is the case's:
``remesh_spacing`` = h unless given), their blobs are the high-order Gaussian
``gaussian6``, their velocity comes from the particle-mesh solve (``method = "mesh"``;
the spectral sum is the reference) and they diffuse by the exact lattice diffusion
(``viscous = "lattice"``; ``"pse"`` the alternative, which needs n ≥ 13 × overlap for its
reach).  ``tracers``
passive tracers are seeded uniformly in the box (``seed``).

The blob field of this lattice is ζ̂(3σ²/2) u up to the lattice's aliases (ζ̂ the
kernel's transform; ``docs/periodic.md``).  The case uses classical stretching (minus
its mean, so Σα stays 0) and projects the lattice strengths onto divergence-free fields
after each remeshing (``remesh_project``): with the transpose scheme the kinetic energy
grew after t ≈ 4 at every n tried (``docs/periodic.md``, "The Taylor–Green case").  The
CPU default (n = 24) is a demonstration, not converged; at 128³ (``--preset gpu``) the
lattice field's dissipation peaks within 1.5 % of the pseudo-spectral solution
(``benchmarks/validation/spectral_ns.py``) and its energy stays within 1.4 % to t = 12.
"""
from __future__ import annotations

import math

import numpy as np

from .registry import CaseSetup, register_case

__all__ = ["taylor_green", "taylor_green_lattice"]

BOX = 2.0 * math.pi


def taylor_green_lattice(n, box=BOX, planes=None, xp=np):
    """Positions (n³, 3) [L] of the lattice (i, j, k) h, h = box/n (i slowest, as the
    periodic remeshing orders its nodes), the Taylor–Green vorticity there (n³, 3) [1/T]
    and h [L], arrays of ``xp`` (the same bits in NumPy and CuPy); ``planes`` (i0, i1):
    only the nodes of those x-planes (rows i0 n² … i1 n² − 1 of the whole, the same
    bits)."""
    from ..geometry.periodic import lattice_node_positions  # noqa: PLC0415
    i0, i1 = (0, n) if planes is None else planes
    h = box / n
    g = np.arange(n) * h
    x = lattice_node_positions(i0 * n * n, i1 * n * n, n, h, np.float64, xp)
    k = 2.0 * math.pi / box
    # separable: sines and cosines of the n coordinates (on the host), broadcast (the
    # same numbers as the functions of the n³ positions, without n³ evaluations of each)
    c, s = xp.asarray(np.cos(k * g)), xp.asarray(np.sin(k * g))
    cx, sx = c[i0:i1, None, None], s[i0:i1, None, None]
    cy, sy = c[None, :, None], s[None, :, None]
    cz, sz = c[None, None, :], s[None, None, :]
    w = xp.empty((i1 - i0, n, n, 3))
    w[..., 0] = k * (-cx * sy * sz)
    w[..., 1] = k * (-sx * cy * sz)
    w[..., 2] = k * (2.0 * sx * sy * cz)
    return x, w.reshape(-1, 3), h


def _size(values):
    """(elements, tracers) of a taylor_green config without building it."""
    n, tracers = values["n"], values["tracers"]
    return int(n) ** 3, int(tracers)


def _check(n, overlap, tracers):
    """ValueError unless the case's parameters are valid."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 4:
        raise ValueError(f"n must be an integer >= 4 (lattice points per side), got {n!r}.")
    if not (isinstance(overlap, (int, float)) and overlap > 0):
        raise ValueError(f"overlap must be > 0 (sigma / h), got {overlap!r}.")
    if isinstance(tracers, bool) or not isinstance(tracers, (int, np.integer)) or tracers < 0:
        raise ValueError(f"tracers must be an integer >= 0, got {tracers!r}.")


@register_case("taylor_green", units=("L = 1/k, k the wavenumber of the vortex (the box is "
                                      "2 pi L)", "T = 1/(U k), U its velocity amplitude"),
               dt=0.1, t_end=10.0, integrator="rk2", nu=1.0 / 400.0,
               viscous="lattice", pse_order=4, kernel="gaussian6", boundary="periodic",
               box=BOX, method="mesh", remesh_every=1, remesh_project=True,
               stretching="classical", device="cpu")
def taylor_green(n=24, overlap=1.0, tracers=0, seed=0):
    """The Taylor–Green vortex on the n³ lattice of the periodic box [0, 2π)³."""
    return _build(dict(n=n, overlap=overlap, tracers=tracers, seed=seed), np)


def _build(params, xp):
    """The case's state made in ``xp`` (the tracers on the host): the builder's on the
    host, and ``taylor_green.on_device`` on the run's GPU (``xp`` CuPy: the same bits,
    and no n³ array made on the host or sent to the device)."""
    n, overlap, tracers = params["n"], params["overlap"], params["tracers"]
    _check(n, overlap, tracers)
    x, w, h = taylor_green_lattice(int(n), xp=xp)
    y = np.random.default_rng(params["seed"]).random((int(tracers), 3)) * BOX
    return CaseSetup(x=x, alpha=w * h ** 3, sigma=xp.full(len(x), overlap * h), tracers=y,
                     groups=[], volume=xp.full(len(x), h ** 3),
                     run={"remesh_spacing": h, "remesh_overlap": float(overlap)})


def _slab(params, communicator):
    """This rank's rows of the case's state (no tracers) on the ranks of ``communicator``
    that hold the n³ lattice split by x-slabs (:mod:`vortexsim.model.slab_partition`):
    its x-planes of :func:`taylor_green_lattice`, the same bits as the whole's rows."""
    from ..geometry.slab import Slabs  # noqa: PLC0415
    n, overlap = params["n"], params["overlap"]
    _check(n, overlap, params["tracers"])
    planes = Slabs(int(n), int(communicator.size))[int(communicator.rank)]
    x, w, h = taylor_green_lattice(int(n), planes=planes)
    return CaseSetup(x=x, alpha=w * h ** 3, sigma=np.full(len(x), overlap * h),
                     tracers=np.empty((0, 3)), groups=[], volume=np.full(len(x), h ** 3),
                     run={"remesh_spacing": h, "remesh_overlap": float(overlap)})


taylor_green.size = _size
taylor_green.slab = _slab
taylor_green.on_device = _build
