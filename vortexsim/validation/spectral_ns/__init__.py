r"""A pseudo-spectral reference solver of incompressible Navier–Stokes in the periodic box:
the same flows as vortexsim's periodic runs, solved by another method, for side-by-side
comparisons of accuracy and time to solution (``benchmarks/validation/``).  The solver
(:mod:`.solver`), its run and output (:mod:`.driver`) and its command line (:mod:`.cli`;
``python benchmarks/validation/spectral_ns.py``); nothing else in the package imports it.

What it solves
--------------
∂u/∂t = u × ω − ∇(p + ½|u|²) + ν ∇²u,   ∇·u = 0,   ω = ∇ × u,

in [0, L)³ (default L = 2π), periodic in x, y, z, on the n³ lattice x_i = i L/n
(i = 0..n−1, the same in y and z; arrays (3, n, n, n) indexed [component, x, y, z]).
Units are the flow's: L (length) and T (time); ν in L²/T.

Method
------
* **Velocity form, rotational nonlinear term.**  The state is û(k), the real FFT
  (``rfftn`` over the three space axes) of u on the lattice, k ∈ (2π/L) ℤ³.  The right-hand
  side is N(û) = P(k) · F[u × ω] with u and ω = F⁻¹[i k × û] on the lattice (one batched
  inverse transform of the 6 components, one forward transform of the 3 of u × ω), and
  P_ij = δ_ij − k_i k_j/|k|² the projection onto divergence-free fields, which also
  removes the pressure and ½|u|² gradients.  N(k = 0) = 0: the mean velocity is
  conserved (the box mean of u × ω vanishes for a divergence-free u).
* **2/3-rule dealiasing.**  Only modes with |m_x|, |m_y|, |m_z| < n/3 (m = k L/2π, integer
  wavenumbers) are kept: the nonlinear term is truncated there, and so is the initial field
  (``set_velocity``; the energy it removes is reported).  Products of kept modes then alias
  only onto removed ones, the spatial discretization is an exact Galerkin truncation, and
  it conserves energy: dE/dt = −ε exactly in the semi-discrete system.
* **Classic RK4 with an integrating factor** (Lawson's RK4): the viscous term is integrated
  exactly, with E_h = e^{−ν|k|²h},

      a = N(û_n),  b = N(E_{h/2}(û_n + h/2 a)),  c = N(E_{h/2} û_n + h/2 b),
      d = N(E_h û_n + h E_{h/2} c),
      û_{n+1} = E_h û_n + h/6 (E_h a + 2 E_{h/2} (b + c) + d).

  Chosen over an explicit viscous term because it has no viscous step limit and is exact
  for the linear (Stokes) part: a single Fourier mode whose nonlinear term vanishes (the
  shear wave u = (sin y, 0, 0)) decays as e^{−ν|k|²t} to round-off.  Fourth order in time
  for the nonlinear part.
* **Time step:** ``--dt`` fixed, or ``--cfl C``: dt = C h / max(|u| + |v| + |w|) (h = L/n),
  recomputed at each diagnostic row (every ``--every`` steps) from the velocity there, so
  that the step loop never copies to the host; with both, the smaller of the two.  The last
  step is shortened to land on ``--t-end``, and a step on each ``--spectrum-times`` entry.
  Neither given: ``--cfl 0.5`` (RK4's advective limit is about dt·max|u||k|_max ≤ 2.8, with
  |k|_max = (2π/L)·n/3 per axis: C ≲ 1.3 per axis).
* **Device:** NumPy FFT on the CPU, CuPy (cuFFT) on the GPU (``--device cpu|gpu``): the
  array namespace ``xp`` is chosen once; float64 and complex128 throughout.

Initial conditions (``--init``)
-------------------------------
``taylor-green``  u = (sin k₀x cos k₀y cos k₀z, −cos k₀x sin k₀y cos k₀z, 0), k₀ = 2π/L:
                  E₀ = 1/8, ε₀ = 6νk₀²E₀, Re = 1/(νk₀) (physics.md, "Analytic checks").
``shear-wave``    u = (sin k₀y, 0, 0): a steady-shape Navier–Stokes solution (its nonlinear
                  term is a gradient), E = ¼ e^{−2νk₀²t}.
PATH              a velocity field on the n³ lattice in the netCDF format below (n from the
                  file; ``--n`` may be left out, or must agree).

The velocity-field file (netCDF, read and written with xarray, engine netcdf4)
------------------------------------------------------------------------------
The format of :mod:`vortexsim.output.lattice_field` (its docstring is the reference;
``write_velocity_field`` and ``read_velocity_field`` are imported from there, so that a
``vortexsim run isotropic_turbulence`` writes its initial field, ``RUN/initial_field.nc``,
in it and ``--init RUN/initial_field.nc`` starts from exactly that field):

* dimensions ``x``, ``y``, ``z`` of size n each; coordinates x = i L/n (i = 0..n−1, the
  same in y and z), units ``L``, optional (when present they must be this lattice);
* velocity: either the three variables ``u``, ``v``, ``w`` with dims (x, y, z), or one
  variable ``velocity`` with dims (component, x, y, z) and component of size 3; float64,
  units ``L/T``; data in any dimension order (transposed by name);
* global attributes: ``box`` (L, the period; if absent, n times the x coordinate spacing,
  else ``--box``), optional ``time`` (T) and free text (``title``, ...);
* written by :func:`write_velocity_field` as ``u``, ``v``, ``w`` with coordinates,
  ``box``, ``time``, ``format = "periodic-velocity-field"``, ``format_version = 1``,
  ``Conventions = "CF-1.10"`` (files written before, without it, read the same).
The field should be divergence-free with zero mean (physics.md's periodic box); the solver
projects it onto divergence-free fields and truncates it to the kept modes, and reports
the energy each removes (warning above 1e-10 of E).  ``--save-field PATH`` writes the
final field in the same format (so that fields travel between the two codes both ways).

What it measures
----------------
Rows every ``--every`` steps (and at t = 0, t_end and each spectrum time): t, the kinetic
energy E = ½⟨|u|²⟩, the dissipation ε = ν⟨|ω|²⟩ (= 2ν⟨s_ij s_ij⟩ = −dE/dt of the viscous
term in a periodic box), both from the modes by Parseval, max|u| over the lattice, dt and
the CFL number; −dE/dt from the rows (``numpy.gradient``, as good as their spacing); and at
``--spectrum-times`` the shell-summed spectrum E(k), shells of width k₀ = 2π/L around
|k| = s k₀, normalized so that Σ_s E(k_s) k₀ = E (∫E(k)dk = E).  Wall time: the steps
alone (timed in blocks between rows; on the GPU synchronized at the rows only), per step
(total/steps and the median over blocks), the diagnostics, the whole run.  The peak of ε
and its time (parabola through the largest row and its neighbours).  With
``--statistics`` (ν > 0) every row also holds the turbulence statistics of
:func:`vortexsim.diagnostics.turbulence.flow_statistics`, the same definitions as vortexsim's
diagnostics: ``u_rms``, ``integral_scale``, ``taylor_scale``, ``re_lambda``,
``kolmogorov_eta``, ``k_max_eta``, ``skewness``, ``flatness`` (5 more FFTs of the velocity
per row, in the diagnostics' wall time); without it the output is as before.

Output: a netCDF file of the rows and spectra (``--nc``, default the JSON path with
``.nc``; variables with ``units`` and ``long_name``), a JSON summary (``--out``, default
``benchmarks/results/spectral_ns_DATE[_LABEL].json`` from the script, through
:func:`vortexsim.validation.records.write_json`), and a
table printed last.

Usage::

    python benchmarks/validation/spectral_ns.py --n 64 --nu 1/1600 --t-end 10 --cfl 0.5 --every 5 \\
        --spectrum-times 0,9,10 --device cpu --out tg1600_n64.json     # Taylor–Green Re 1600
    python benchmarks/validation/spectral_ns.py --init field.nc --nu 0.01 --t-end 2 --dt 0.01 \\
        --device gpu --save-field final.nc                             # from a file
    python benchmarks/validation/spectral_ns.py --n 32 --nu 0.1 --t-end 0.1 --dt 0.01   # smoke test
    vortexsim run isotropic_turbulence --preset gpu --out runs/hit128
    python benchmarks/validation/spectral_ns.py --init runs/hit128/initial_field.nc --nu 0.0056 \
        --t-end 2 --dt 0.01 --every 5 --spectrum-times 0,1,2 --statistics --device gpu \
        --nc hit128_spectral.nc   # the same field (compare_isotropic.py compares the runs)

Numbers: ``--nu``, ``--t-end``, ``--dt``, ``--box`` take fractions (``1/1600``) and
multiples of π (``2pi``).  Reference for Taylor–Green at Re = 1600: peak ε ≈ 0.0127 near
t ≈ 9 at converged (512³) resolution (Brachet et al. 1983; van Rees et al., J. Comput.
Phys. 230 (2011)); coarse grids miss it widely.
"""
from __future__ import annotations

# the velocity-field file (the format above) lives in the package, so that vortexsim
# writes its initial fields in it (``initial_field.nc``)
from vortexsim.output.lattice_field import (FIELD_FORMAT, FIELD_FORMAT_VERSION,
                                            lattice, read_velocity_field, write_velocity_field)

from .cli import REMOVED_WARN, main, parse_number, parse_times
from .driver import STATISTICS, peak, run, write_netcdf
from .solver import SpectralNS, array_namespace, shear_wave, taylor_green

__all__ = ["FIELD_FORMAT", "FIELD_FORMAT_VERSION", "lattice", "read_velocity_field",
           "write_velocity_field", "REMOVED_WARN", "main", "parse_number", "parse_times",
           "STATISTICS", "peak", "run", "write_netcdf", "SpectralNS", "array_namespace",
           "shear_wave", "taylor_green"]
