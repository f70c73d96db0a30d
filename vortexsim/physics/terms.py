r"""The terms of the right-hand side: each a contribution to dα/dt, an action on the cores,
or an action around the particle step (:class:`Term`).

    Stretching        dα/dt = (∇u)ᵀ α ("transpose") or (α·∇) u ("classical")
    CoreSpreading     σ² ← σ² + 2ν Δt, exactly at every stage time (viscous="core_spreading")
    PSE               dα/dt += ν (Δα) by particle strength exchange (viscous="pse")
    LatticeDiffusion  exact diffusion of the periodic remeshing lattice, half a step before
                      and half after the particle step (viscous="lattice")

A new term (a sub-grid model) is a new :class:`Term`; :class:`vortexsim.physics.rhs.VortexRHS`
sums their rates and the model calls their step hooks.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .._names import choice
from ..backend import array_namespace
from ..geometry.periodic import are_lattice_nodes
from ..kernels.cutoff import stretching as stretching_rhs
from ..kernels.morton import column_sums
from ..state import uniform_core_radius
from .lattice_viscosity import diffuse_lattice
from .slab_lattice import diffuse_slab, slab_column_mean

__all__ = ["Stage", "Term", "Stretching", "CoreSpreading", "PSE", "LatticeDiffusion",
           "STRETCHING_SCHEMES"]

STRETCHING_SCHEMES = ("transpose", "classical")


@dataclasses.dataclass
class Stage:
    """What the terms of one right-hand-side evaluation see (device arrays).

    x, alpha : (N, 3) elements [L], [L³/T]; sigma : (N,) cores at the stage time [L];
    t : float [T]; u : (N, 3) velocity at the elements [L/T]; grad_u : (N, 3, 3) its
    gradient [1/T], ∂u_i/∂x_j, self pairs removed; volume : (N,) element volumes [L³]
    (NaN: not known); sigma_range : host (min σ, max σ) at the stage time; lattice : n
    when the elements sit on the periodic n³ lattice in remesh order (else None).
    """

    x: object
    alpha: object
    sigma: object
    t: float
    u: object
    grad_u: object
    volume: object = None
    sigma_range: tuple = (0.0, 0.0)
    lattice: int | None = None


class Term:
    """A contribution to dα/dt.  Subclasses implement :meth:`alpha_rate`; viscous terms
    that act on the cores also :meth:`sigma_at` (the identity by default); terms that act
    around the particle step (lattice diffusion) :meth:`before_step` and
    :meth:`after_step`, which the model calls before the step's first stage and after its
    commit and remeshing."""

    name = "term"

    def before_step(self, alpha, x, iteration, dt):
        """The strengths α (N, 3) [L³/T] the particle step starts from, given the
        elements' α and positions x (N, 3) [L] at ``iteration`` and the step ``dt`` [T]
        (the identity by default)."""
        return alpha

    def after_step(self, alpha, dt):
        """The strengths α (N, 3) after the step of ``dt`` [T] and its remeshing (the
        identity by default)."""
        return alpha

    def reset(self):
        """A new particle set replaced the elements (nothing by default)."""

    def alpha_rate(self, stage: Stage):
        """dα/dt (N, 3) [L³/T²] of this term at ``stage``, or None when it adds none."""
        return None

    def sigma_at(self, sigma0, elapsed, xp):
        """Cores (N,) [L] after ``elapsed`` [T] of the term's action on ``sigma0``."""
        return sigma0

    def sigma_range_at(self, sigma_range, elapsed):
        """Host (min σ, max σ) after ``elapsed`` [T], from ``sigma_range`` at its start."""
        return sigma_range


class Stretching(Term):
    """Vortex stretching, dα/dt = (∇u)ᵀ α ("transpose") or (α·∇) u ("classical").

    ``zero_sum`` (the periodic box with the classical scheme): the rates' mean is taken
    off every element, s_p ← s_p − (1/N) Σ_q s_q, so that Σα stays exactly as it was
    (zero in the box).  The continuous rate integrates to zero (∫(ω·∇)u dV = 0 for a
    periodic field), so the correction is of the size of the particle quadrature's
    error; the transpose scheme keeps Σα without it."""

    name = "stretching"

    def __init__(self, scheme="transpose", zero_sum=False):
        self.scheme = choice("stretching scheme", scheme, STRETCHING_SCHEMES)
        self.zero_sum = bool(zero_sum) and self.scheme == "classical"
        self._ranks = None

    def bind_ranks(self, communicator, n_total):
        """Each rank holds a part of the ``n_total`` elements (the periodic box split by
        slabs, :mod:`vortexsim.model.slab_partition`): the mean rate is the whole set's,
        the ranks' column sums added in rank order (one ``allreduce_sum`` per stage).
        ``communicator`` None: this process holds the whole set again."""
        self._ranks = None if communicator is None else (communicator, int(n_total))

    def alpha_rate(self, stage):
        rate = stretching_rhs(stage.alpha, stage.grad_u, self.scheme)
        if self.zero_sum:
            if self._ranks is None:
                rate = rate - column_sums(rate) / rate.shape[0]
            else:
                comm, n_total = self._ranks
                sums = column_sums(rate) if rate.shape[0] else \
                    array_namespace(rate).zeros(3, dtype=rate.dtype)
                rate = rate - comm.allreduce_sum(sums) / n_total
        return rate


class CoreSpreading(Term):
    """Gaussian core spreading: σ(t)² = σ(t₀)² + 2ν (t − t₀); no rate of α."""

    name = "core_spreading"

    def __init__(self, nu):
        self.nu = float(nu)

    def sigma_at(self, sigma0, elapsed, xp):
        if elapsed == 0:
            return sigma0
        return xp.sqrt(sigma0 * sigma0 + 2.0 * self.nu * elapsed)

    def sigma_range_at(self, sigma_range, elapsed):
        lo, hi = sigma_range
        if elapsed == 0:
            return lo, hi
        grow = 2.0 * self.nu * elapsed
        return float(np.sqrt(lo * lo + grow)), float(np.sqrt(hi * hi + grow))


class PSE(Term):
    """Viscous diffusion by particle strength exchange: dα_p/dt = ν (Δα)_p
    (:func:`vortexsim.physics.pse.pse_rate`, kernel width ε = σ/√2, one σ, kernel of
    ``order`` 2 or 4), in free space, the periodic box of edge ``box`` or above the ground
    plane z = ``ground_z``, on the arrays' device; the cores do not change.

    Above a ground plane the elements exchange with the elements and their images
    (:func:`vortexsim.geometry.mirror`, volumes alike): the image field extends the
    tangential vorticity oddly and the normal one evenly across the plane, so the
    diffusion of the extended field keeps ω_x = ω_y = 0 and ∂ω_z/∂z = 0 on the plane,
    the vorticity conditions of an impermeable free-slip wall."""

    name = "pse"

    def __init__(self, nu, box=None, order=2, ground_z=None):
        self.nu = float(nu)
        self.box = box
        self.order = order
        self.ground_z = None if ground_z is None else float(ground_z)

    def check_core(self, sigma):
        """ValueError unless elements of core radius ``sigma`` [L] can exchange in the
        periodic box (its edge at least twice the kernel's reach at ε = σ/√2); the
        remeshing checks the core it will set before the first step."""
        if self.box is None:
            return
        from .pse_common import PSE_TOL, check_pse_box, pse_reach  # noqa: PLC0415
        epsilon = float(sigma) / np.sqrt(2.0)
        check_pse_box(self.box, pse_reach(epsilon, PSE_TOL, self.order), epsilon, PSE_TOL,
                      self.order)

    def check_dt(self, dt, sigma, limit, scheme):
        """ValueError when explicit steps ``dt`` [T] of ``scheme`` (stable for dt λ in
        [−``limit``, 0]) are unstable for PSE on cores ``sigma`` [L]: the operator's most
        negative eigenvalue is −c ν/ε², ε = σ/√2, c = 1 (order 2: symbol e^{−k²ε²} − 1)
        or 2 (order 4: (2 + k²ε²) e^{−k²ε²} − 2)."""
        rate = (1.0 if self.order == 2 else 2.0) * self.nu / (0.5 * float(sigma) ** 2)
        if dt * rate > limit:
            raise ValueError(
                f"PSE is unstable with dt = {dt:g}: nu = {self.nu:g} on cores sigma = "
                f"{sigma:.6g} decays its finest mode at the rate {rate:.6g} per unit time, "
                f"and {scheme} is stable only for dt x rate <= {limit:g} (got "
                f"{dt * rate:.4g}); set dt <= {limit / rate:.6g}, a smaller nu or larger "
                "cores.")

    def alpha_rate(self, stage):
        from .pse import pse_rate  # noqa: PLC0415
        sigma = uniform_core_radius(*stage.sigma_range, "viscous='pse'")
        if stage.lattice is not None:          # the same pair sum as FFT convolutions
            from .pse_lattice import pse_rate_lattice  # noqa: PLC0415
            return pse_rate_lattice(stage.alpha, stage.volume, stage.lattice, self.box,
                                    sigma / np.sqrt(2.0), self.nu,
                                    order=self.order).astype(stage.alpha.dtype, copy=False)
        x, alpha, volume = stage.x, stage.alpha, stage.volume
        n = x.shape[0]
        if self.ground_z is not None:          # the images take part in the exchange
            from ..geometry.boundaries import mirror  # noqa: PLC0415
            xp = array_namespace(x)
            x_img, alpha_img = mirror(x, alpha, self.ground_z)
            x, alpha = xp.concatenate([x, x_img]), xp.concatenate([alpha, alpha_img])
            volume = xp.concatenate([volume, volume])
        return pse_rate(x, alpha, volume, sigma / np.sqrt(2.0), self.nu, box=self.box,
                        order=self.order)[:n].astype(stage.alpha.dtype, copy=False)


class LatticeDiffusion(Term):
    """The viscous term ``viscous = "lattice"`` (ν > 0): half a step of exact lattice
    diffusion before the particle step (:meth:`before_step`) and half a step after it and
    its remeshing (:meth:`after_step`), on the periodic n³ lattice of edge ``box`` [L]
    (``n`` is set by :meth:`vortexsim.physics.rhs.VortexRHS.bind_lattice`).  It adds no
    rate of α.

    The elements must start on the lattice in remesh order; at iteration 0 that is
    checked once per particle set (:meth:`reset` after a new set).
    """

    name = "lattice_diffusion"
    #: the most e-foldings nu dt (2π/L)² of the box's largest scale in one step: beyond
    #: it every strength is round-off after the first step
    MAX_DECAY = 50.0

    def check_dt(self, dt, sigma, limit, scheme):
        """ValueError when one step ``dt`` [T] would diffuse even the box's largest
        scale away (ν dt (2π/L)² > :attr:`MAX_DECAY`); exact, so stable for any dt."""
        del sigma, limit, scheme
        decay = self.nu * dt * (2.0 * np.pi / self.box) ** 2
        if decay > self.MAX_DECAY:
            raise ValueError(
                f"nu = {self.nu:g} with dt = {dt:g} diffuses even the box's largest scale by "
                f"exp(-{decay:.4g}) in one step: the vorticity would be round-off after the "
                f"first step; set nu x dt <= {self.MAX_DECAY / (2 * np.pi / self.box) ** 2:.6g}.")

    def __init__(self, box, nu, n=None):
        self.box, self.nu, self.n = float(box), float(nu), n
        self._on_nodes = None
        self._slab = None

    def bind_slab(self, fft, row0):
        """Each rank holds the rows row0 … of its x-slab of the lattice (the periodic box
        split by slabs, :mod:`vortexsim.model.slab_partition`): diffuse through the slab
        transforms ``fft`` (:class:`vortexsim.geometry.slab.SlabFFT`) and take out the
        whole lattice's mean (:mod:`vortexsim.physics.slab_lattice`).  ``fft`` None: the
        whole lattice again."""
        self._slab = None if fft is None else (fft, int(row0))

    def _check_start(self, x):
        """Raise ValueError unless the positions ``x`` (n³, 3) [L] are the lattice nodes
        (i, j, k) L/n in the order (i n + j) n + k (one host check per particle set)."""
        if self._on_nodes is None:
            n = self.n
            fft, row0 = self._slab if self._slab is not None else (None, 0)
            rows = n ** 3 if fft is None else fft.real_shape[0] * n * n
            self._on_nodes = tuple(x.shape) == (rows, 3) and \
                are_lattice_nodes(x, n, self.box, row0)
        if not self._on_nodes:
            raise ValueError(
                "viscous='lattice' needs the elements on the remeshing lattice at the start "
                f"(the {self.n}^3 nodes (i, j, k) L/n in the order (i n + j) n + k, as the "
                "periodic cases place them); remesh them first (Simulation.remesh()) or use "
                "viscous='pse'.")

    def reset(self):
        """A new particle set: check it again at iteration 0."""
        self._on_nodes = None

    def before_step(self, alpha, x, iteration, dt):
        """The strengths α (n³, 3) after half a step ``dt``/2 of diffusion; at iteration 0
        the positions ``x`` must be the lattice's nodes."""
        if iteration == 0:
            self._check_start(x)
        return self._diffuse(alpha, dt)

    def after_step(self, alpha, dt):
        """The strengths α (n³, 3) after the other half step of diffusion."""
        return self._diffuse(alpha, dt)

    def _diffuse(self, alpha, dt):
        """Half a step of diffusion; Σα (zero in the box up to the round-off of the field
        before the step, which diffusion keeps) taken out, so that this round-off does not
        outlive a field that decays by many orders of magnitude."""
        if self._slab is not None:                    # this rank's slab of the lattice
            fft = self._slab[0]
            out = diffuse_slab(alpha, fft, self.box, self.nu, 0.5 * dt)
            if out is not alpha:
                out -= slab_column_mean(out, self.n, fft.communicator)
            return out
        out = diffuse_lattice(alpha, self.n, self.box, self.nu, 0.5 * dt)
        if out is not alpha:                          # a new array: in place
            out -= out.mean(axis=0)
        return out
