r"""The diagnostics row of a model's current state (``physics.md``).

:class:`DiagnosticsRow` computes one row: the impulses, the quadratic integrals E, Ω₂, H,
the ring groups' centres and radii, and in the periodic box the box averages and the
lattice's turbulence statistics.  On the device: the quadratic sums' pass, one
elementwise kernel and one product (:class:`vortexsim.diagnostics.integrals.RowSums`),
one transfer.  The quadratic sums come from direct double sums up to
:data:`DIRECT_DIAGNOSTICS_PAIRS` element × source pairs, beyond from the O(N) fields of
the FMM, and in the periodic box from the Fourier modes.
"""
from __future__ import annotations

import logging
import math

from ..backend import to_host
from ..fmm.fields import CoresNotUniform
from ..kernels.cutoff import GAUSSIAN_ORDERS
from ..geometry import PeriodicBox
from ..geometry.remesh import remesh
from ..summation.spectral import FIELD_SUMS
from . import integrals as D
from .health import line_spacing, ring_escaped
from .slab_row import split_row_parts
from .turbulence import vorticity_statistics

logger = logging.getLogger(__name__)

__all__ = ["DiagnosticsRow", "DIRECT_DIAGNOSTICS_PAIRS", "LATTICE_STATISTICS"]

#: element × source pairs up to which the diagnostics' energy and enstrophy are direct
#: double sums (cheaper there than an FMM pass); beyond, the O(N) fields of the FMM
#: (:meth:`vortexsim.summation.Summation.fields`)
DIRECT_DIAGNOSTICS_PAIRS = {"cpu": 1 << 23, "gpu": 1 << 24}

#: the statistics of :func:`vortexsim.diagnostics.turbulence.flow_statistics` that a
#: periodic run's diagnostics rows carry under their own names
LATTICE_STATISTICS = ("u_rms", "integral_scale", "taylor_scale", "re_lambda",
                      "kolmogorov_eta", "k_max_eta", "skewness", "flatness")


class DiagnosticsRow:
    """The diagnostics of one model, row by row: ``row = DiagnosticsRow(model); row()``.

    It keeps what the rows of one particle set share (:meth:`row_sums`) and warns once
    when the quadratic sums fall back to the O(N²) direct sums.
    """

    def __init__(self, model):
        self.model = model
        self._row_sums = None
        self._split_sums = None
        self._warned_direct = False

    def __call__(self):
        """Integral diagnostics of the model's current state (host values).

        Returns a dict: ``t``, ``iteration``, ``total_vorticity`` (3,) [L³/T],
        ``linear_impulse`` (3,) [L⁴/T], ``angular_impulse`` (3,) [L⁵/T], ``energy``
        [L⁵/T²], ``helicity`` [L⁴/T²], ``enstrophy`` [L³/T²] (formulas in
        :mod:`vortexsim.diagnostics.integrals`; with a ground plane: of the real
        elements, the energy and helicity of the fluid above the plane, images included
        as sources), and for ring groups ``ring_names``, ``ring_centre`` (R, 3) [L]
        (impulse-based centre: |α|-weighted centroid across the axis, r²|α|-weighted
        along it, the axis n̂ = sign(Γ)P/|P| of the ring), ``ring_radius`` (R,) [L]
        (sqrt(|P·n̂|/(π|Γ|))) and ``ring_axis`` (R, 3); in the periodic box also
        ``mean_energy`` ½⟨|u|²⟩ [L²/T²] and ``dissipation`` ν⟨|∇×u|²⟩ [L²/T³] (box
        averages of the induced velocity), and ``particle_energy`` ½⟨ω_p·ψ⟩ [L²/T²] and
        ``particle_dissipation`` ν⟨ω_p·ω⟩ [L²/T³] (the energy the method keeps and its
        viscous loss: :meth:`vortexsim.summation.spectral.SpectralSum.field_sums`), and with
        remeshing the turbulence statistics and energy spectrum of the lattice's
        vorticity (:meth:`lattice_statistics`); and the numerical-health measures of
        :meth:`health`.  Where the ranks hold the state split by slabs the row is
        computed on the slabs (:mod:`.slab_row`; collective).
        """
        model = self.model
        lattice = None
        if model.partition is not None:           # on the slabs, whatever is assembled
            fields = None
            own = len(model.own_elements)          # one RowSums per slab size
            if self._split_sums is None or self._split_sums[0] != own:
                self._split_sums = (own, D.RowSums([], [], [], own, model.device.xp))
            v, lattice = split_row_parts(model, LATTICE_STATISTICS, self._split_sums[1])
        else:
            el = model.elements
            fields, direct = self._quadratic()
            sums = self.row_sums()
            v = sums.finish(to_host(sums(el.x, el.alpha, fields, extra=direct or ())))
        energy, enstrophy, helicity = v["field_sums"] if fields is not None else v["extra"][:3]
        if fields is not None and fields.omega is None:
            enstrophy = math.nan                       # the kernel has no ζ
        out = {"t": model.t, "iteration": model.iteration,
               **{k: v[k] for k in ("total_vorticity", "linear_impulse", "angular_impulse")},
               "energy": float(energy), "helicity": float(helicity),
               "enstrophy": float(enstrophy)}
        if isinstance(model.domain, PeriodicBox):
            # box averages of the induced velocity: ½⟨|u|²⟩, ν⟨|∇×u|²⟩; of the method's
            # own energy and its viscous loss: ½⟨ω_p·ψ⟩, ν⟨ω_p·ω⟩
            kinetic, curl, e_p, z_p = (float(a) for a in v["extra"][3:7])
            volume = model.domain.box ** 3
            out.update(mean_energy=kinetic / volume, dissipation=model.rhs.nu * curl / volume,
                       particle_energy=e_p / volume,
                       particle_dissipation=model.rhs.nu * z_p / volume)
            out.update(lattice if lattice is not None else self.lattice_statistics())
        rings = [g for g in model.groups if g.is_ring]
        if rings:
            out.update(ring_names=[g.name for g in rings],
                       **{k: v[k] for k in ("ring_centre", "ring_radius", "ring_axis")})
        out.update(self.health(rings, out))
        return out

    def health(self, rings, row):
        """The numerical-health measures of the current state
        (:mod:`vortexsim.diagnostics.health`): ``step_strain`` dt·max‖∇u‖_F of the last
        step; outside the periodic box (whose elements a run keeps on its lattice)
        ``spacing_max``, the largest element spacing along the vortex lines over σ; per
        ring ``ring_escaped``, the fraction of its strength farther than R/2 from its core
        circle (``row``'s ring frames)."""
        model, el = self.model, self.model.elements
        out = {"step_strain": float(model.step_strain)}
        if not isinstance(model.domain, PeriodicBox):
            out["spacing_max"] = line_spacing(el.x, el.alpha, el.sigma)
        if rings:
            out["ring_escaped"] = ring_escaped(
                el.x, el.alpha, [(g.start, g.stop) for g in rings], row["ring_centre"],
                row["ring_axis"], row["ring_radius"])
        return out

    def lattice_statistics(self):
        """The turbulence statistics of the remeshing lattice's vorticity (periodic box,
        ``remesh_every`` > 0; else {}): ω_n = α_n/h³ at the n³ nodes — the strengths in
        lattice order when the last step ended with a remeshing, else the elements'
        M4′ interpolation onto the lattice (:func:`vortexsim.geometry.remesh.remesh`,
        exact for elements on the nodes) — and its Biot–Savart velocity without the
        blobs' smoothing (:func:`vortexsim.diagnostics.turbulence.vorticity_statistics`):
        what a grid code holds, and the field compared with a spectral code.  Row keys
        ``lattice_energy`` ½⟨|u|²⟩, ``lattice_dissipation`` 2ν⟨s_ij s_ij⟩,
        ``lattice_enstrophy`` ⟨|ω|²⟩, ``u_rms``, ``integral_scale``, ``taylor_scale``,
        ``re_lambda``, ``kolmogorov_eta``, ``k_max_eta``, ``skewness``, ``flatness``,
        and ``wavenumber`` and ``energy_spectrum`` (host arrays, shells of
        :func:`vortexsim.diagnostics.turbulence.energy_spectrum`)."""
        model = self.model
        n = model.remeshing.lattice_nodes()
        if n is None:
            return {}
        box, el, xp = model.domain.box, model.elements, model.device.xp
        h = box / n
        if model.remeshing.remeshed_lattice(model.iteration) == n and len(el) == n ** 3:
            alpha = el.alpha                        # remeshed: the nodes in lattice order
        else:
            alpha = remesh(el.x, el.alpha, h, box_length=box).alpha
        omega = alpha.astype(xp.float64).reshape(n, n, n, 3) / h ** 3
        stats, k, e = vorticity_statistics(omega, box, model.rhs.nu)
        out = {f"lattice_{key}": stats[key] for key in ("energy", "dissipation", "enstrophy")}
        out.update({key: stats[key] for key in LATTICE_STATISTICS})
        out.update(wavenumber=to_host(k), energy_spectrum=to_host(e))
        return out

    def row_sums(self):
        """The :class:`vortexsim.diagnostics.integrals.RowSums` of the elements and their
        ring groups (made once per particle set)."""
        model = self.model
        rings = [g for g in model.groups if g.is_ring]
        key = (len(model.elements), tuple((g.start, g.stop) for g in rings))
        if self._row_sums is None or self._row_sums[0] != key:
            self._row_sums = (key, D.RowSums(
                [(g.start, g.stop) for g in rings], [g.circulation for g in rings],
                [g.axis for g in rings], len(model.elements), model.device.xp))
        return self._row_sums[1]

    def _quadratic(self):
        """(fields, None) with the elements' :class:`~vortexsim.fmm.fields.Fields` (or
        shares) of one O(N) FMM pass (:meth:`Summation.fields`, float64) beyond
        :data:`DIRECT_DIAGNOSTICS_PAIRS` element × source pairs; else (None, (E, Ω₂, H))
        as 0-d device arrays by the direct double sums (also where the pass cannot run:
        an algebraic kernel with cores of several sizes); in the periodic box (None, (E,
        Ω₂, H, ½∫|u|², ∫|∇×u|², ½∫ω_p·ψ, ∫ω_p·ω)) from the modes
        (:meth:`vortexsim.summation.spectral.SpectralSum.field_sums`)."""
        model = self.model
        el, summation = model.elements, model.summation
        if summation.box is not None:                   # the periodic box: from the modes
            xp = model.device.xp
            if summation.kernel.name not in GAUSSIAN_ORDERS:
                # the modes are the Gaussian blobs' (the periodic FMM's other kernels)
                return None, tuple(xp.asarray(math.nan) for _ in FIELD_SUMS)
            sums = summation.field_sums(el.x, el.alpha, el.sigma, model.sigma_range,
                                        lattice=model.on_lattice())
            return None, tuple(xp.asarray(sums[k]) for k in FIELD_SUMS)
        xs, alpha_s, sigma_s = model.domain.sources(el.x, el.alpha, el.sigma)
        if len(el) * xs.shape[0] > DIRECT_DIAGNOSTICS_PAIRS[model.device.kind]:
            images = xs.shape[0] != len(el)
            try:
                # no images: the symmetric pass (shares whose sums are exact)
                return summation.fields(xs, alpha_s, sigma_s,
                                        el.x if images else None,
                                        el.sigma if images else None,
                                        symmetric=not images), None
            except CoresNotUniform as exc:
                if not self._warned_direct:
                    logger.warning("diagnostics by direct double sums, O(N^2): %s", exc)
                    self._warned_direct = True
        u, _ = model.velocity()
        energy, enstrophy = D.energy_and_enstrophy(el.x, el.alpha, el.sigma,
                                                   summation.kernel.name,
                                                   sources=(xs, alpha_s, sigma_s))
        return None, (energy, enstrophy, D.helicity(el.alpha, u.astype(el.x.dtype)))
