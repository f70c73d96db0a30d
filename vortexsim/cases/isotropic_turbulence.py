r"""Decaying isotropic turbulence in the periodic box [0, 2π)³.

The initial velocity is a random, Gaussian, divergence-free field on the n³ lattice with
the spectrum E(k) ∝ k⁴ exp(−2 (k/k_p)²) and ½⟨|u|²⟩ = ``energy``
(:func:`vortexsim.diagnostics.random_field.random_solenoidal_field`, seeded by
``seed``: the same field on the CPU and the GPU to round-off, modes kept by the 2/3
rule; on a GPU it is made there, ``isotropic_turbulence.on_device``).  Its vorticity ω = ∇ × u is taken
spectrally (exact for this band-limited field), and the elements sit on the lattice with
α = ω h³, volumes h³ and cores σ = ``overlap`` × h; as in ``taylor_green`` they are
remeshed every step and made divergence-free (``remesh_project``), stretched by the
classical scheme, carry ``gaussian6`` blobs, take their velocity from the particle-mesh
solve (``method = "mesh"``) and diffuse by the exact lattice diffusion (``viscous =
"lattice"``; PSE of order 4 the alternative).  ``tracers`` passive tracers are seeded
uniformly in the box (seed + 1).

:func:`isotropic_turbulence_field` returns the initial velocity itself (n, n, n, 3), so
that another code (``benchmarks/validation/spectral_ns.py``) can start from the same field, and
:func:`write_initial_field` writes it as a netCDF file
(:mod:`vortexsim.output.lattice_field`, ``u``, ``v``, ``w`` on dims x, y, z, the case
parameters n, k_peak, energy, seed and nu as attributes): a fresh ``vortexsim run
isotropic_turbulence`` (any n, any preset) writes ``initial_field.nc`` into its run
directory (``CaseSetup.files``; not rewritten on restart), and ::

    python benchmarks/validation/spectral_ns.py --init RUN/initial_field.nc --nu NU ...

starts the spectral code from exactly that field (``benchmarks/validation/compare_isotropic.py``
compares the two runs).
"""
from __future__ import annotations

import math

import numpy as np

from .registry import CaseSetup, register_case

__all__ = ["isotropic_turbulence", "isotropic_turbulence_field", "write_initial_field",
           "INITIAL_FIELD_FILE"]

BOX = 2.0 * math.pi
#: the file of the initial field in a run directory (written by ``vortexsim run``)
INITIAL_FIELD_FILE = "initial_field.nc"


def isotropic_turbulence_field(n, k_peak=4.0, energy=0.5, seed=0, with_modes=False, xp=np):
    """The initial velocity (n, n, n, 3) [L/T] at the nodes (i, j, k) h, h = 2π/n, of the
    case with these parameters (``k_peak`` in units of k₀ = 1 for the 2π box), made in
    ``xp``; with ``with_modes`` also its half spectra
    (:func:`vortexsim.diagnostics.random_field.random_solenoidal_field`)."""
    from ..diagnostics.random_field import random_solenoidal_field  # noqa: PLC0415
    return random_solenoidal_field(int(n), BOX, k_peak=float(k_peak), energy=float(energy),
                                   seed=int(seed), with_modes=with_modes, xp=xp)


def write_initial_field(path, config, attrs=None, overwrite=False, field=None):
    """Write the initial velocity of the case with the resolved ``config`` (``sim.config``:
    n, k_peak, energy, seed, nu) to ``path``, atomically, in the velocity-field format of
    :mod:`vortexsim.output.lattice_field` (u (3, n, n, n) [L/T] on the lattice i 2π/n, box
    2π, time ``config["t0"]`` or 0), with the case and those parameters as global
    attributes, and ``attrs`` (e.g. source, history) added; an existing ``path`` raises
    FileExistsError unless ``overwrite``.  The writer of ``initial_field.nc`` in
    ``CaseSetup.files``.  ``field``: that velocity (n, n, n, 3), on the host or the
    device, when the caller has it already (the builder's), else it is made again (on
    the host)."""
    from ..backend import to_host  # noqa: PLC0415
    from ..output.lattice_field import write_velocity_field  # noqa: PLC0415
    params = {"case": "isotropic_turbulence", "n": int(config["n"]),
              "k_peak": float(config["k_peak"]), "energy": float(config["energy"]),
              "seed": int(config["seed"]), "nu": float(config["nu"])}
    u = to_host(field) if field is not None else isotropic_turbulence_field(
        params["n"], params["k_peak"], params["energy"], params["seed"])
    title = (f"initial velocity of vortexsim case isotropic_turbulence: {params['n']}^3, "
             f"k_peak = {params['k_peak']:g}, energy = {params['energy']:g}, "
             f"seed = {params['seed']}, nu = {params['nu']:g}")
    return write_velocity_field(path, np.moveaxis(u, -1, 0), BOX,
                                t=float(config.get("t0") or 0.0), overwrite=overwrite,
                                title=title, attrs={**(attrs or {}), **params})


class _InitialFieldWriter:
    """``initial_field.nc``'s writer in ``CaseSetup.files``: :func:`write_initial_field`
    with the builder's own velocity (``u``, made with ``params``), which it lets go
    once written (24 B per lattice point of host memory; making it again takes seconds
    at 512³).  A config whose parameters differ from ``params`` gets its own field."""

    def __init__(self, u, params):
        self.u, self.params = u, params

    def __call__(self, path, config, attrs=None, overwrite=False):
        u, self.u = self.u, None
        same = all(config.get(k) == v for k, v in self.params.items())
        return write_initial_field(path, config, attrs, overwrite,
                                   field=u if same else None)


def _curl_from_modes(u_hat, n, box, xp=np):
    """ω = ∇ × u (n³, 3), rows in lattice order, of the periodic lattice field whose half
    spectra are ``u_hat`` (3 arrays (n, n, n//2 + 1) of ``xp``): three inverse real FFTs
    (the Nyquist planes have no derivative)."""
    from ..geometry.lattice_modes import irfft3, wavenumbers  # noqa: PLC0415
    k = wavenumbers(n, box, xp, derivative=True)
    w = xp.empty((n ** 3, 3))
    for i in range(3):
        j, m = (i + 1) % 3, (i + 2) % 3
        w[:, i] = irfft3(1j * (k[j] * u_hat[m] - k[m] * u_hat[j]), n, xp).reshape(n ** 3)
    return w


def _size(values):
    """(elements, tracers) of an isotropic_turbulence config without building it."""
    return int(values["n"]) ** 3, int(values["tracers"])


def _check(n, k_peak, energy, seed, overlap, tracers):
    """ValueError unless the case's parameters are valid."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 8:
        raise ValueError(f"n must be an integer >= 8 (lattice points per side), got {n!r}.")
    for name, value in (("k_peak", k_peak), ("energy", energy), ("overlap", overlap)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a number > 0, got {value!r}.")
    for name, value in (("seed", seed), ("tracers", tracers)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}.")


@register_case("isotropic_turbulence", units=("L = box / (2 pi) (the box is 2 pi L)",
                                              "T, the unit in which velocities are given "
                                              "(energy in L^2/T^2)"),
               dt=0.05, t_end=2.0, integrator="rk2", nu=0.02,
               viscous="lattice", pse_order=4, kernel="gaussian6", boundary="periodic", box=BOX,
               method="mesh",
               remesh_every=1, remesh_project=True, stretching="classical", device="cpu")
def isotropic_turbulence(n=32, k_peak=4.0, energy=0.5, seed=0, overlap=1.0, tracers=0):
    """Decaying isotropic turbulence on the n³ lattice of the periodic box [0, 2π)³."""
    return _build(dict(n=n, k_peak=k_peak, energy=energy, seed=seed, overlap=overlap,
                       tracers=tracers), np)


def _build(params, xp):
    """The case's state made in ``xp`` (the tracers on the host): the builder's on the
    host, and ``isotropic_turbulence.on_device`` on the run's GPU (``xp`` CuPy), where
    the host draws the noise only (the same numbers as on the CPU, so the same field to
    round-off) and the transforms, the curl and the lattice are the device's: of the
    n³ arrays only the noise crosses to the device, and the host's transforms (tens of
    seconds at 512³) are not made (``docs/periodic.md``, "Start-up")."""
    from ..geometry.periodic import lattice_node_positions  # noqa: PLC0415
    n, k_peak, energy, seed, overlap, tracers = (params[k] for k in (
        "n", "k_peak", "energy", "seed", "overlap", "tracers"))
    _check(n, k_peak, energy, seed, overlap, tracers)
    n = int(n)
    h = BOX / n
    x = lattice_node_positions(0, n ** 3, n, h, np.float64, xp)
    u, u_hat = isotropic_turbulence_field(n, k_peak, energy, seed, with_modes=True, xp=xp)
    alpha = _curl_from_modes(u_hat, n, BOX, xp)      # ω, from û: no forward transform
    del u_hat
    alpha *= h ** 3
    alpha -= alpha.mean(axis=0)                      # Σα = 0 to round-off
    y = np.random.default_rng(int(seed) + 1).random((int(tracers), 3)) * BOX
    return CaseSetup(x=x, alpha=alpha, sigma=xp.full(len(x), overlap * h), tracers=y,
                     groups=[], volume=xp.full(len(x), h ** 3),
                     run={"remesh_spacing": h, "remesh_overlap": float(overlap)},
                     files={INITIAL_FIELD_FILE: _InitialFieldWriter(u, dict(
                         n=n, k_peak=k_peak, energy=energy, seed=seed))})


def _slab(params, communicator):
    """This rank's rows of the case's state (no tracers) on the ranks of ``communicator``
    that hold the n³ lattice split by x-slabs (:mod:`vortexsim.model.slab_partition`):
    the slab of the same field (:func:`vortexsim.diagnostics.random_field
    .random_solenoidal_slab`, to round-off), its vorticity taken from its spectrum.
    Rank 0 gathers the whole velocity for ``initial_field.nc`` (24 B a node on its
    host); no rank holds more of the state than its slab.  Collective."""
    from ..diagnostics.random_field import random_solenoidal_slab  # noqa: PLC0415
    from ..geometry.periodic import lattice_node_positions  # noqa: PLC0415
    from ..geometry.slab import SlabFFT  # noqa: PLC0415
    n, seed, overlap = params["n"], params["seed"], params["overlap"]
    _check(n, params["k_peak"], params["energy"], seed, overlap, params["tracers"])
    n, h = int(n), BOX / int(n)
    fft = SlabFFT(n, communicator, np)
    u, u_hat = random_solenoidal_slab(fft, BOX, k_peak=float(params["k_peak"]),
                                      energy=float(params["energy"]), seed=int(seed))
    k = fft.wavenumbers(BOX, derivative=True)
    rows = u.shape[0]
    alpha = np.empty((rows, 3))
    for i in range(3):                      # ω = ∇ × u from û, then α = ω h³
        j, m = (i + 1) % 3, (i + 2) % 3
        alpha[:, i] = fft.inverse(1j * (k[j] * u_hat[m] - k[m] * u_hat[j])).reshape(rows)
    del u_hat
    alpha *= h ** 3
    total = np.asarray(communicator.allreduce_sum(alpha.sum(axis=0)))
    alpha -= total / n ** 3                 # Σα = 0 to round-off
    whole = np.empty((n ** 3, 3)) if communicator.is_root else None
    communicator.gather_rows_on_root(u, fft.slabs.counts(n * n), whole)
    del u
    files = {} if whole is None else {INITIAL_FIELD_FILE: _InitialFieldWriter(
        whole.reshape(n, n, n, 3), dict(n=n, k_peak=params["k_peak"],
                                        energy=params["energy"], seed=seed))}
    r0, r1 = fft.x_planes[0] * n * n, fft.x_planes[1] * n * n
    return CaseSetup(x=lattice_node_positions(r0, r1, n, h, np.float64, np), alpha=alpha,
                     sigma=np.full(rows, overlap * h), tracers=np.empty((0, 3)), groups=[],
                     volume=np.full(rows, h ** 3),
                     run={"remesh_spacing": h, "remesh_overlap": float(overlap)}, files=files)


isotropic_turbulence.size = _size
isotropic_turbulence.slab = _slab
isotropic_turbulence.on_device = _build
