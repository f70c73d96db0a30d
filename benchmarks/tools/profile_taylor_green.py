"""Where a Taylor–Green step goes: the step of the `taylor_green` case and its
parts, timed one by one on the same state.

    python benchmarks/tools/profile_taylor_green.py --n 128 --device gpu

Builds the case (its defaults: RK2, spectral sum, PSE of order 4, remeshing every step
with the solenoidal projection; ``--set key=value`` overrides them), takes ``--warm``
steps, then times (median of ``--repeats``, CUDA events on the GPU):

* ``step``: one whole ``sim.step()`` (two right-hand sides, the remeshing, the checks);
* ``summation``: one u and ∇u evaluation at the elements (spectral sum, non-uniform FFTs);
* ``lattice``: the same on the lattice by plain FFTs (a step's first stage where
  :data:`vortexsim.model.LATTICE_SUM_DEVICES` has the device);
* ``pse``: one PSE rate (``viscous = "pse"``);
* ``diffusion``: half a step of exact lattice diffusion (``viscous = "lattice"``, the
  case's default; two per step);
* ``remesh``: one M4′ remeshing of the elements (with the projection when the case has it);
* ``projection``: the projection alone;
* ``diagnostics``: one ``sim.diagnostics()`` row, and its parts: ``row_fields`` (the
  box's field sums from the modes), ``row_sums`` (the elements' sums and their one
  transfer), ``row_lattice`` (the lattice's turbulence statistics and spectrum) and
  ``row_health``.

A step makes two summations (the first on the lattice where enabled, the second by
non-uniform FFTs), two PSE rates (RK2) or two half steps of lattice diffusion, one
remeshing; the rest (the stretching rates, the RK combinations, the once-per-step host
check) is the remainder.
"""
from __future__ import annotations

import argparse
import os
import sys

# the shared helpers of benchmarks/performance/ (timing.py, bench_fmm.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "performance"))
import timing as T  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=64, help="lattice points per side (default 64)")
    p.add_argument("--warm", type=int, default=2, help="steps before timing (default 2)")
    p.add_argument("--repeats", type=int, default=3, help="timed calls per part (default 3)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a case parameter (a Python literal), e.g. dt=0.05")
    T.add_common_options(p, "profile_taylor_green")
    args = p.parse_args(argv)

    import vortexsim
    from vortexsim.physics.lattice_viscosity import diffuse_lattice
    from vortexsim.physics.pse import pse_rate
    from vortexsim.model import LATTICE_SUM_DEVICES
    from vortexsim.physics.projection import project_solenoidal
    from vortexsim.geometry.remesh import remesh
    extra = T.parse_overrides(args.set)
    sim = vortexsim.make_case("taylor_green", n=args.n, device=args.device, progress=False,
                              **extra)
    for _ in range(args.warm):
        sim.step()
    el, cfg = sim.elements, sim.config
    h, box = cfg["remesh_spacing"], cfg["box"]
    sigma = float(el.sigma[0])

    def summation():
        sim.summation(el.x, el.alpha, el.sigma, el.x, n_self=len(el), gradient=True,
                      sigma_range=sim.sigma_range)

    n_side = args.n

    def lattice():
        sim.summation.on_lattice(el.alpha, n_side, sim.sigma_range)

    def pse():
        pse_rate(el.x, el.alpha, el.volume, sigma / 2 ** 0.5, cfg["nu"], box=box,
                 order=cfg["pse_order"])

    def diffusion():
        diffuse_lattice(el.alpha, n_side, box, cfg["nu"], 0.5 * cfg["dt"])

    def remeshing():
        out = remesh(el.x, el.alpha, h, box_length=box, overlap=cfg["remesh_overlap"])
        if cfg["remesh_project"]:
            project_solenoidal(out.alpha, args.n)

    def projection():
        project_solenoidal(el.alpha, args.n)

    def step():
        sim.step()

    def diagnostics():
        sim.diagnostics()

    row = sim.diagnostics_row

    def row_fields():
        row._quadratic()

    def row_sums():
        from vortexsim.backend import to_host
        sums = row.row_sums()
        to_host(sums(el.x, el.alpha, None, extra=()))

    def row_lattice():
        row.lattice_statistics()

    def row_health():
        row.health([], {})

    viscous = cfg["viscous"]
    parts = dict(summation=summation, lattice=lattice,
                 **({"pse": pse} if viscous == "pse" else {"diffusion": diffusion}),
                 remesh=remeshing, projection=projection, diagnostics=diagnostics,
                 row_fields=row_fields, row_sums=row_sums, row_lattice=row_lattice,
                 row_health=row_health, step=step)
    ms = {name: 1e3 * T.time_median(fn, args.device, repeats=args.repeats, warmup=1)
          for name, fn in parts.items()}
    first = ms["lattice"] if args.device in LATTICE_SUM_DEVICES else ms["summation"]
    visc = 2 * ms["pse" if viscous == "pse" else "diffusion"]
    rest = ms["step"] - first - ms["summation"] - visc - ms["remesh"]
    print(f"taylor_green n = {args.n} ({args.n ** 3} elements), {T.device_name(args.device)}, "
          f"dt = {cfg['dt']}, {cfg['integrator']}, tol = {cfg['tol']}")
    for name, v in ms.items():
        print(f"  {name:12s} {v:9.1f} ms")
    print(f"  {'remainder':12s} {rest:9.1f} ms  (step − 2 summations − 2 × "
          f"{'PSE' if viscous == 'pse' else 'diffusion'} − remesh)")
    T.write_json(args, "profile_taylor_green", args.device,
                 dict(n=args.n, config={k: cfg[k] for k in ("dt", "integrator", "tol",
                                                             "kernel", "viscous",
                                                             "pse_order", "stretching",
                                                             "remesh_project")},
                      ms=ms, remainder_ms=rest),
                 [dict(what=f"taylor_green step n={args.n}", ms=ms["step"])])


if __name__ == "__main__":
    main()
