r"""Resolution study of the ring cases: leapfrog, collision, ring_ground and
oblique_collision at three resolutions around ``--preset gpu``, and each case's CPU
default beside them.

``--lattice`` (the presets that remesh): the levels differ in the remeshing lattice's h
and the physical core that keeps the effective core σ_eff at the preset's: h × 2^(1/3)
(coarse), the preset's h (medium) and h / 4^(1/3) (fine, four times the nodes per
volume; ``--h-scale`` moves all three), every level from the preset's rings discretised
as finely as its lattice (:func:`lattice_level`, :func:`lattice_core`).  Without it, the levels coarsen the rings' own discretisation
as below (the presets before they remeshed).  oblique_collision: the bridge circulation
across the plane of contact (:func:`vortexsim.validation.ring_events.bridge_circulation`)
at every row, and the first times it reaches 0.1 and 0.5 Γ (the reconnection time).

What runs
---------
Every case runs from its case file (``cases/NAME.toml``: dt, integrator, t_end, physics)
through the public API (``config.load_case_file``/``load_presets``/``check_params``,
``vortexsim.make_case``, ``Simulation.run``), at these levels:

fine     the case file's ``[presets.gpu]``, exactly (n_phi 129 per ring for two rings,
         258 for one; 7 layers at spacing 0.5 σ_c; σ = 0.05; the FMM)
medium   the fine level coarsened by c = √2 in every element spacing
coarse   coarsened by c = 2
default  the case file without a preset (the CPU default: direct sum, σ = "auto")

Coarsening by c scales all three spacings of the elements alike: the element core
σ = c σ_fine, the layer spacing Δ = c Δ_fine (``layer_spacing`` = c × 0.5, in units of
the physical core σ_c = ``core`` = 0.1, which is the same at every level), the station
spacing 2πR/n_phi (n_phi = round(n_phi_fine / c)); the layers still reach about 3 σ_c
(layers = 1 + round(6/c)).  σ/Δ ≈ 1 and σ/(2πR/n_phi) ≈ 1 (two rings) or 2 (one ring)
at every level.  With σ_eff = √(σ_c² + σ²) (``physics.md``; what the run log states) and
σ_eff,repr = √(m₂ + σ²), m₂ the discrete core's second moment per direction (the core
the layers actually represent, below σ_c where they truncate the Gaussian):

level    n_phi          layers  Δ/σ_c  σ       elements                  σ_eff  σ_eff,repr
fine     129 / 258      7       0.5    0.05    2×129×127 = 32766 / 32766 0.112  0.110
medium   91 / 182       5       0.707  0.0707  2×91×61 = 11102 / 11102   0.122  0.121
coarse   65 / 129       4       1.0    0.1     2×65×37 = 4810 / 4773     0.141  0.140
default  32, 48 / 48    2       1.0    auto    448, 672 / 336            below

(two rings / one ring; default: leapfrog, collision / ring_ground).  The levels use the
FMM at tol 1e-6; the defaults the case files' direct sum, with σ = 0.196 (leapfrog),
0.131 (collision, ring_ground), σ_eff = 0.220, 0.165, σ_eff,repr = 0.207, 0.146.
(``--list`` prints the exact table of a run.)  Same dt, integrator (RK4) and t_end as the
case file at every level.  Tracers are reduced to ``--tracers`` per ring (default 16):
they are passive (advected, inducing nothing), so their number changes no element and no
quantity below, only the cost.

Quantities (definitions; rows every ``--diag-interval``, default every step dt)
--------------------------------------------------------------------------------
Each ring is measured as ``Simulation.diagnostics()`` does (``physics.md``, "Vortex
rings"; ``ring_events.ring_rows``): its impulse centre Z (r²|α|-weighted position along the
axis) and its impulse radius R = √(|P·n̂|/(π|Γ|)).

leapfrog     pass times: every t in [0, t_end] where the axial gap Z_front − Z_rear
             changes sign (``ring_events.crossing_times``, linear between rows, as
             validate_rings.py does); radius range: (min, max) of each ring's R over
             [0, t_end] (``ring_events.value_range``: interior extrema refined by the parabola
             through three rows).
collision    the rings are mirror images about z = 0 (the head-on collision is the ring
             hitting a wall); h = (Z_upper − Z_lower)/2, the height of each ring above the
             plane of symmetry.
ring_ground  h = Z − ground_z, the height of the ring above the ground (the same flow as
             the upper ring of collision, whose case file has spacing = 2 × height).
  closest approach   the minimum of h over [0, t_end] (``ring_events.extremum``, parabolic);
                     its time t_min is reported only when the minimum lies inside the run:
                     an inviscid ring approaching a wall (or its mirror image) slows and
                     spreads but never rebounds (a rebound needs the wall's boundary
                     layer), so h usually still falls at t_end (ring_ground's CPU default:
                     monotonically from 1.5 to 0.154 at t = 10); then ``t_min`` is null,
                     ``reached`` false and h_min = h(t_end).
  approach times     t(h = 0.5 R₀) and t(h = 0.25 R₀): when h first falls to half and a
                     quarter of the initial radius (linear between rows; null if not
                     reached): event times that exist without a rebound.
  final radius       R(t_end) (collision: the upper ring; the lower one is its mirror
                     image, stored too).
Spread fine–medium: |q_fine − q_medium| and that relative to |q_fine|, per quantity
(per pass for the pass times).  Energy, total vorticity and impulse (full
``Simulation.diagnostics()``) are evaluated at t = 0 and t_end only (``--no-energy``:
not at all): their drifts are stored as a check.

Output
------
``--out`` (default ``benchmarks/results/resolution_study.json``), rewritten after every
run (atomically): per case its definitions and, per level, the parameters, sizes, cores,
quantities, drifts, wall time and the recorded series (t, Z, R per ring); beside it
``resolution_study.md`` with one Markdown table per case (rows coarse, medium, fine,
default, "spread fine–medium").  ``--resume`` keeps the complete runs of an existing file
with the same parameters and runs the rest.

GPU (one H100, one call of at most ~8 min)::

    PYTHONPATH=. python benchmarks/validation/resolution_study.py --device gpu --budget 420

Estimate: an RK4 step of the fine leapfrog is 55 ms with 2^20 tracers (bench_step; less
with 32 tracers); medium/coarse are latency-bound (≈ 15–25 ms); ring_ground's images
double the sources (≈ 2× per step).  Steps: leapfrog 200, collision 160, ring_ground
200 per level.  fine ≈ 200×55 + 160×55 + 200×110 ms ≈ 42 s, medium + coarse ≈ 2 × 560 ×
25 ms ≈ 28 s, the defaults (direct sum, ≤ 672 elements) ≈ 560 × 10 ms ≈ 6 s; ring rows
(each step, a few reductions and one transfer) ≈ 1 ms each; energy at both ends (all
pairs, ≈ 0.3 s at 32766, ≈ 0.6 s with images) ≈ 8 s; CUDA compilation on a fresh
machine ≈ 30–60 s.  In all ≈ 2–3 min; ``--budget`` stops the study cleanly (a run cut
short is marked ``complete: false``) should it be slower.

CPU test of the pipeline (tiny sizes: the gpu preset with n_phi / 8, σ × 4, two layers,
then coarsened as above; t_end = 10 dt; the defaults at their size)::

    PYTHONPATH=. python benchmarks/validation/resolution_study.py --quick --device cpu --out /tmp/rs.json

Options: --cases, --levels, --device auto|cpu|gpu, --quick, --t-end, --dt, --tol,
--tracers, --diag-interval, --no-energy, --budget SECONDS, --resume, --list, --out.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import time

import numpy as np

import vortexsim
from vortexsim.backend import resolve_device
from vortexsim.cases import case_defaults
from vortexsim.cases.rings import cross_section
from vortexsim.cli import case_file
from vortexsim.config import (OUTPUT_DEFAULTS, ConfigError, check_params,
                              load_case_file, load_presets, parse_assignments)

from vortexsim.validation.records import (device_name, environment, free_gpu_memory,
                                          jsonable)
from vortexsim.validation.study_tables import (APPROACH, BRIDGE_LEVELS, LEVELS, markdown,
                                               print_plan, write_json, write_markdown, fmt)
from vortexsim.validation.ring_events import (RingRecorder, bridge_circulation,
                                              crossing_times, extremum, first_crossing,
                                              value_range)

CASES = ("leapfrog", "collision", "ring_ground", "oblique_collision")
#: runs go default first (small), then coarse → fine (LEVELS: the tables' row order)
RUN_ORDER = ("default", "coarse", "medium", "fine")
#: coarsening of every element spacing relative to the gpu preset
FACTORS = {"fine": 1.0, "medium": math.sqrt(2.0), "coarse": 2.0}
#: ``--lattice``: the remeshing lattice spacing h of each level relative to the preset's
#: (half, one and four times the preset's nodes per volume; medium is the preset)
LATTICE_FACTORS = {"coarse": 2.0 ** (1 / 3), "medium": 1.0, "fine": 4.0 ** (-1 / 3)}
#: rings of each case (element counts before a run)
N_RINGS = {"leapfrog": 2, "collision": 2, "ring_ground": 1, "oblique_collision": 2}
PRESET = "gpu"
LEVELS_NOTE = ("fine = [presets.gpu]; medium, coarse = fine with every element spacing "
               "(sigma, layer spacing, station spacing) times sqrt(2), 2; default = the case "
               "file without a preset; sigma_eff = sqrt(core^2 + sigma^2), core = 0.1 at "
               "every level")
LATTICE_NOTE = ("coarse, medium, fine = [presets.gpu] with the remeshing lattice h times "
                "2^(1/3), 1, 4^(-1/3) and the physical core chosen so that the represented "
                "sigma_eff = sqrt(m2 + sigma^2) is the preset's at every level (sigma = h "
                "after a remeshing); default = the case file without a preset")
OUT_NAME = "resolution_study.json"
TRACERS_NOTE = ("tracers are passive (advected, inducing nothing): their number changes no "
                "element and no quantity here, only the cost, so every level runs with "
                "--tracers per ring")


# -- levels -----------------------------------------------------------------------------
def _round(v):
    return int(math.floor(v + 0.5))


def coarsened(base, factor):
    """The discretization ``base`` (n_phi, layers, layer_spacing, sigma) with every element
    spacing times ``factor``: σ and Δ = layer_spacing·σ_c times c, n_phi / c, and as many
    layers as reach the same outermost radius (layers − 1)·Δ."""
    span = (base["layers"] - 1) * base["layer_spacing"]
    spacing = base["layer_spacing"] * factor
    layers = 1 + _round(span / spacing) if span > 0 else 1
    return {"n_phi": max(3, _round(base["n_phi"] / factor)), "layers": layers,
            "layer_spacing": spacing, "sigma": base["sigma"] * factor}


def quick_base(preset):
    """``--quick``: the gpu preset with n_phi / 8, σ × 4, two layers at spacing σ_c."""
    return {"n_phi": max(3, _round(preset["n_phi"] / 8)), "layers": 2, "layer_spacing": 1.0,
            "sigma": 4 * preset["sigma"]}


def element_count(n_rings, n_phi, layers, core):
    """n_rings · n_phi · (1 + 3 L (L − 1)) (one layer when core = 0)."""
    per_station = 1 if (core == 0 or layers == 1) else 1 + 3 * layers * (layers - 1)
    return n_rings * n_phi * per_station


def default_sigma(params):
    """σ = "auto" of the ring builder: max(2πR/n_phi, layer_spacing·σ_c if layers > 1)."""
    if params.get("sigma") is not None:
        return float(params["sigma"])
    return max(2 * math.pi * params["radius"] / params["n_phi"],
               params["layer_spacing"] * params["core"] if params["layers"] > 1 else 0.0)


def represented_core(core, layers, layer_spacing):
    """√m₂ of the discrete core (per direction): below σ_c where the layers truncate."""
    pts, w = cross_section(core, int(layers), layer_spacing)
    return math.sqrt(float((w * (pts ** 2).sum(axis=1)).sum()) / 2)


def case_inputs(case):
    """(path, the case file's checked parameters without its output keys, the same with
    every default filled in, the checked gpu preset)."""
    path = case_file(case)
    if path is None:
        raise FileNotFoundError(f"no case file for {case!r}; expected cases/{case}.toml.")
    name, file_params = load_case_file(path)
    defaults = {k: v for k, v in case_defaults(name).items() if k != "progress"}
    defaults.update(OUTPUT_DEFAULTS)
    params = check_params(file_params, defaults, f"{path}: ")
    presets = load_presets(path)
    if PRESET not in presets:
        raise ValueError(f"{path} has no [presets.{PRESET}] table; the study's fine level is "
                         f"that preset (presets: {', '.join(presets) or 'none'}).")
    preset = check_params(presets[PRESET], defaults, f"{path} [presets.{PRESET}]: ")
    for key in OUTPUT_DEFAULTS:
        params.pop(key, None)
    full = {**{k: v for k, v in defaults.items() if k not in OUTPUT_DEFAULTS}, **params}
    return path, params, full, preset


def plan(args):
    """The runs: [{case, level, params (of make_case: the case file's, then the level's),
    info}], in run order."""
    runs = []
    for case in args.cases:
        path, file_params, full, preset = case_inputs(case)
        sets = check_params(parse_assignments(args.set), full, "--set: ")
        preset = {**preset, **sets}
        if "core" in sets:
            full = {**full, "core": sets["core"]}
        dt = args.dt or full["dt"]
        t_end = args.t_end or (10 * dt if args.quick else full["t_end"])
        base = quick_base(preset) if args.quick else \
            {k: preset[k] for k in ("n_phi", "layers", "layer_spacing", "sigma")}
        common = {"tracers_per_ring": args.tracers, "device": args.device, "t_end": t_end,
                  "dt": dt}
        for level in RUN_ORDER:
            if level not in args.levels:
                continue
            if level == "default":
                overrides = dict(common)
            elif args.lattice:
                overrides = lattice_level(preset, level, args.quick, common, full["core"],
                                          args.h_scale)
            else:
                overrides = {**coarsened(base, FACTORS[level]), "method": "fmm",
                             "tol": args.tol, **sets, **common}
                if level == "fine" and not args.quick:
                    overrides.update({k: v for k, v in preset.items()
                                      if k not in ("tracers_per_ring",)})
            params = {**full, **overrides}
            sigma = default_sigma(params)
            remeshed = args.lattice and level != "default"
            if remeshed:                     # the core every remeshing sets
                sigma = remesh_overlap(params) * params["remesh_spacing"]
            core = params["core"]
            info = {"case_file": path, "n_phi": params["n_phi"], "layers": params["layers"],
                    "layer_spacing": params["layer_spacing"], "sigma": sigma, "core": core,
                    "sigma_eff": math.hypot(core, sigma),
                    "sigma_eff_represented": math.hypot(
                        represented_core(core, params["layers"], params["layer_spacing"]),
                        sigma),
                    "n_elements": None if remeshed else element_count(
                        N_RINGS[case], params["n_phi"], params["layers"], core),
                    "remesh_spacing": params["remesh_spacing"] if remeshed else None,
                    "method": params["method"], "tol": params["tol"], "dt": dt,
                    "t_end": t_end, "integrator": params["integrator"],
                    "steps": _round(t_end / dt)}
            runs.append({"case": case, "level": level,
                         "params": {**file_params, **overrides}, "info": info})
    return runs


def lattice_level(preset, level, quick, common, core, scale=1.0):
    """``--lattice``: the overrides of ``level``: the whole gpu preset (remeshing, viscous
    term, adaptive step; not its tracers) with its lattice spacing h times
    ``LATTICE_FACTORS[level]`` and the physical core ``core`` (the case's σ_c) changed by
    :func:`lattice_core`, so that every level represents the same vorticity: the preset's
    σ_eff.  The initial rings' element spacings (σ, layers, stations) scale with h
    (:func:`coarsened`): the first remeshing puts each level's rings on its lattice, and
    elements further apart than a few h would leave that lattice's field lumpy on their
    spacing (M4′ reaches 2h; a node midway between elements 2h apart gets nothing), a
    perturbation that grows as the lattice is refined.  ``scale``: every level's h
    times it (``--h-scale``: 4^(-1/3) makes medium the study's fine level and fine a
    fourth, finer one).  ``quick``: a CPU size (n_phi 24, 2 layers, h and σ_c × 5)."""
    overrides = {k: v for k, v in preset.items() if k != "tracers_per_ring"}
    h = float(preset["remesh_spacing"])
    if quick:
        overrides.update(n_phi=24, layers=2, layer_spacing=1.0, sigma=None, method="direct")
        h *= 5.0
        core *= 5.0
    overlap = remesh_overlap(overrides)
    target = math.hypot(represented_core(core, overrides["layers"],
                                         overrides["layer_spacing"]), overlap * h)
    if not quick:                  # the initial elements as far apart as the lattice's nodes
        overrides.update(coarsened({k: overrides[k] for k in ("n_phi", "layers",
                                                              "layer_spacing", "sigma")},
                                   LATTICE_FACTORS[level] * scale))
    overrides["remesh_spacing"] = h * LATTICE_FACTORS[level] * scale
    overrides["core"] = lattice_core(target, overrides["layers"], overrides["layer_spacing"],
                                     overlap * overrides["remesh_spacing"])
    return {**overrides, **common}


def remesh_overlap(params):
    """Core radius / h that a remeshing sets (``remesh_overlap``; "auto" = 1)."""
    overlap = params.get("remesh_overlap")
    return float(overlap) if isinstance(overlap, (int, float)) else 1.0


def lattice_core(sigma_eff, layers, layer_spacing, blob):
    """The physical core σ_c [L] of a level whose rings have ``layers`` at
    ``layer_spacing`` (units of σ_c) and whose remeshed elements have the core radius
    ``blob`` (overlap × h), such that its vorticity has the effective core ``sigma_eff``
    (the preset's).

    Remeshing onto the lattice keeps the strengths' second moment (M4′ is exact for
    quadratics), and the blobs add theirs: σ_eff² = m₂ + σ², m₂ = (r σ_c)² the layers'
    second moment per direction (:func:`represented_core`; r scales out of σ_c).  Holding
    σ_eff at the preset's value makes the levels discretisations of one vorticity field,
    so that the study converges to one flow; with σ_c held instead, a finer lattice would
    also mean a thinner core (σ_eff 0.112 → 0.103 between oblique_collision's coarse and
    fine lattices), and core-size-sensitive events such as reconnection would move with h.
    """
    if not sigma_eff > blob:
        raise ValueError(
            f"the lattice's blob (core {blob:.4g}) is at least as wide as the effective core "
            f"{sigma_eff:.4g} that every level must represent; use a finer coarsest lattice.")
    r = represented_core(1.0, int(layers), float(layer_spacing))
    return math.sqrt(sigma_eff ** 2 - blob ** 2) / r


# -- quantities -------------------------------------------------------------------------
DEFINITIONS = {
    "leapfrog": {
        "pass_times": "every t in [0, t_end] where Z_front - Z_rear (impulse centres along "
                      "the axis) changes sign, linear between rows [T]",
        "RING_radius_min/max": "range of the ring's impulse radius sqrt(|P.n|/(pi|Gamma|)) "
                               "over [0, t_end], interior extrema refined by a parabola [L]",
    },
    "collision": {
        "h": "(Z_upper - Z_lower)/2: height of each ring above the plane of symmetry z = 0",
    },
    "ring_ground": {
        "h": "Z - ground_z: height of the ring's impulse centre above the ground",
    },
    "oblique_collision": {
        "bridge": "circulation of the bridges across the plane of contact x = 0 over Gamma "
                  "(ring_events.bridge_circulation: the blobs' omega_x flux through the half "
                  "planes y > 0 and y < 0; 0 before contact, 1 when reconnected)",
        "t_bridge0.1, t_bridge0.5": "first time the bridge circulation reaches 0.1, 0.5 "
                                    "Gamma (linear between rows) [T]: the reconnection time",
        "bridge_final": "bridge circulation over Gamma at t_end",
    },
    "approach": {
        "h_min": "minimum of h over [0, t_end] (parabolic refinement) [L]",
        "t_min": "its time [T]; null when h still falls at t_end (reached = false: no "
                 "rebound in an inviscid run), then h_min = h(t_end)",
        "t_h0.5, t_h0.25": "first time h falls to 0.5 R0, 0.25 R0 (linear between rows) [T]",
        "h_final": "h(t_end) [L]",
        "radius_final": "impulse radius at t_end (collision: upper ring) [L]",
    },
}


def quantities(case, t, centres, radii, names, params, extra=None):
    """The study's quantities of one run from its rows (t (K,), centres (K, R, 3), radii
    (K, R), ``extra`` the recorder's other series by name); definitions in the module
    docstring and :data:`DEFINITIONS`."""
    out = {}
    if case == "oblique_collision":
        bridge = np.asarray(extra["bridge"], dtype=float)
        for level in BRIDGE_LEVELS:
            out[f"t_bridge{level:g}"] = first_crossing(t, bridge, level)
        out["bridge_final"] = float(bridge[-1])
        for i, name in enumerate(names):
            out[f"{name}_radius_final"] = float(radii[-1, i])
        return out
    if case == "leapfrog":
        i_rear, i_front = names.index("rear"), names.index("front")
        out["pass_times"] = crossing_times(t, centres[:, i_front, 2] - centres[:, i_rear, 2])
        for i, name in enumerate(names):
            out[f"{name}_radius_min"], out[f"{name}_radius_max"] = value_range(t, radii[:, i])
        return out
    if case == "collision":
        h = 0.5 * (centres[:, names.index("upper"), 2] - centres[:, names.index("lower"), 2])
        ring = names.index("upper")
    else:
        h = centres[:, 0, 2] - params.get("ground_z", 0.0)
        ring = 0
    t_min, h_min, reached = extremum(t, h, "min")
    out.update(t_min=t_min if reached else None, h_min=h_min, reached=reached)
    for frac in APPROACH:
        out[f"t_h{frac:g}"] = first_crossing(t, h, frac * params["radius"])
    out["h_final"] = float(h[-1])
    out["radius_final"] = float(radii[-1, ring])
    if case == "collision":
        out["radius_final_lower"] = float(radii[-1, names.index("lower")])
    return out


def spread(fine, medium):
    """{key: {"abs", "rel"}} of |fine − medium| (relative to |fine|) for every number
    both have; lists (pass times) element by element over the passes both have."""
    def one(a, b):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) \
                or isinstance(a, bool) or isinstance(b, bool):
            return None
        d = abs(a - b)
        return {"abs": d, "rel": d / abs(a) if a else None}
    out = {}
    for key, a in fine.items():
        b = medium.get(key)
        if isinstance(a, list) and isinstance(b, list):
            out[key] = [one(x, y) for x, y in zip(a, b)]
            if len(a) != len(b):
                out[key + "_count"] = {"fine": len(a), "medium": len(b)}
        elif one(a, b) is not None:
            out[key] = one(a, b)
    return out


# -- running ----------------------------------------------------------------------------
def _progress(case, level, t_end, start, steps_done):
    marks = [t_end * k / 4 for k in range(1, 5)]

    def report(sim):
        while marks and sim.t >= marks[0] - 1e-9:
            marks.pop(0)
            wall = time.perf_counter() - start
            n = sim.iteration - steps_done
            print(f"    {case} {level}: t = {sim.t:.4g}/{t_end:g}, {n} steps, {wall:.1f} s"
                  + (f", {1e3 * wall / n:.1f} ms/step" if n else ""), flush=True)
    return report


def diag_schedule(interval, dt):
    """TimeInterval of the ring rows: ``interval`` rounded to a whole number of steps
    (so that no step is shortened), every step when None."""
    k = 1 if interval is None else max(1, _round(interval / dt))
    return vortexsim.TimeInterval(k * dt), k * dt


def _drift(d0, d1):
    def rel(a, b):
        a, b = np.asarray(a, float), np.asarray(b, float)
        n = float(np.linalg.norm(a))
        return float(np.linalg.norm(b - a) / n) if n else float(np.linalg.norm(b - a))
    return {"energy": rel(d0["energy"], d1["energy"]),
            "linear_impulse": rel(d0["linear_impulse"], d1["linear_impulse"]),
            "total_vorticity_abs": float(np.abs(np.asarray(d1["total_vorticity"])
                                                - np.asarray(d0["total_vorticity"])).max()),
            "energy_0": d0["energy"], "energy_end": d1["energy"]}


def run_one(run, args, remaining):
    """Build and run one level; its result dict."""
    case, level, info = run["case"], run["level"], run["info"]
    start = time.perf_counter()
    sim = vortexsim.make_case(case, **run["params"], progress=False)
    n_start = len(sim.elements)           # remeshing changes the count as the run goes
    build_s = time.perf_counter() - start
    schedule, interval = diag_schedule(args.diag_interval, info["dt"])
    measures = {}
    if case == "oblique_collision":
        gamma = float(run["params"].get("circulation", 1.0))
        measures["bridge"] = lambda s: bridge_circulation(
            s.elements.x, s.elements.alpha, s.elements.sigma) / gamma
    rec = RingRecorder(sim, schedule, measures=measures)
    d0 = sim.diagnostics() if args.energy else None
    if remaining is not None:
        sim.wall_time_limit = max(1.0, remaining - (time.perf_counter() - start))
    t_run = time.perf_counter()
    rec.on_row = _progress(case, level, info["t_end"], t_run, sim.iteration)
    sim.callbacks["rings"] = rec
    error = None
    try:
        sim.run(t_end=info["t_end"])
    except vortexsim.SimulationError as exc:
        error = f"{type(exc).__name__} at step {exc.step}, t = {exc.t:.6g}: {exc}"
        print(f"    {case} {level}: {error}", flush=True)
        rec.record(sim)
    run_s = time.perf_counter() - t_run
    d1 = sim.diagnostics() if args.energy else None
    t, centres, radii = rec.arrays()
    names = [g.name for g in sim.groups if g.is_ring]
    steps_s, steps = sim.run_timings.get("steps", [0.0, 0])
    complete = error is None and abs(sim.t - info["t_end"]) <= 1e-9 * max(1, info["t_end"])
    cfg = sim.config
    res = {**info, "level": level, "params": run["params"],
           "n_elements": cfg["n_elements"], "n_tracers": cfg["n_tracers"],
           "sigma": float(cfg["sigma"]), "method": cfg["method"],
           "device": sim.device.describe(), "complete": complete,
           "stop_reason": sim.stop_reason, "error": error, "t_reached": sim.t,
           "diag_interval": interval, "steps": steps,
           "quantities": quantities(case, t, centres, radii, names, cfg, rec.extra),
           "drift": _drift(d0, d1) if args.energy else None,
           "build_s": build_s, "run_s": run_s, "steps_s": steps_s,
           "step_ms": 1e3 * steps_s / steps if steps else None,
           "wall_s": time.perf_counter() - start,
           "series": {"ring_names": names, "t": t, "z": centres[:, :, 2], "radius": radii,
                      **rec.extra}}
    if info.get("remesh_spacing") is not None:        # --lattice: the lattice's core
        res["sigma"] = info["sigma"]
    res["sigma_eff"] = math.hypot(res["core"], res["sigma"])
    res["n_elements_start"], res["n_elements_end"] = n_start, len(sim.elements)
    if info["n_elements"] is not None and res["n_elements"] != info["n_elements"]:
        raise RuntimeError(f"{case} {level}: built {res['n_elements']} elements, the plan "
                           f"said {info['n_elements']}; fix element_count.")
    del sim
    free_gpu_memory(resolve_device(args.device).kind)
    return res


# -- main -------------------------------------------------------------------------------
def parse_args(argv=None, results_dir="results"):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    p.add_argument("--levels", nargs="+", choices=LEVELS, default=list(LEVELS))
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    p.add_argument("--quick", action="store_true",
                   help="tiny levels (the preset with n_phi/8, sigma x 4, 2 layers) and "
                        "t_end = 10 dt: a test of the pipeline, not physics")
    p.add_argument("--t-end", type=float, default=None, help="override every case's t_end [T]")
    p.add_argument("--dt", type=float, default=None, help="override every case's dt [T]")
    p.add_argument("--tol", type=float, default=1e-6, help="FMM tolerance of the levels")
    p.add_argument("--tracers", type=int, default=16, help="tracers per ring (passive)")
    p.add_argument("--diag-interval", type=float, default=None,
                   help="time between ring rows [T], a whole number of steps (default: dt)")
    p.add_argument("--no-energy", dest="energy", action="store_false",
                   help="skip the full diagnostics (energy, impulse) at t = 0 and t_end")
    p.add_argument("--budget", type=float, default=None,
                   help="wall seconds for the whole study: a run is cut short (complete: "
                        "false) and later runs skipped when it is spent")
    p.add_argument("--resume", action="store_true",
                   help="keep the complete runs of an existing --out with the same parameters")
    p.add_argument("--lattice", action="store_true",
                   help="levels by the remeshing lattice of a remeshed preset: h x 2^(1/3), "
                        "h (the preset: medium), h / 4^(1/3) (fine: 4x the nodes)")
    p.add_argument("--h-scale", type=float, default=1.0,
                   help="--lattice: every level's h times this, the effective core kept at "
                        "the preset's (4^(-1/3) = 0.63: medium is the usual fine level, fine "
                        "a fourth level with 16x the preset's nodes per volume)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one parameter at every level but the default, after the "
                        "preset (as vortexsim run's --set), e.g. --set nu=1e-4")
    p.add_argument("--list", action="store_true", help="print the planned runs and exit")
    default_out = os.path.join(results_dir, OUT_NAME)
    p.add_argument("--out", default=default_out, help=f"JSON path (default {default_out})")
    args = p.parse_args(argv)
    for name in ("t_end", "dt", "tol", "diag_interval", "budget", "h_scale"):
        v = getattr(args, name)
        if v is not None and not (math.isfinite(v) and v > 0):
            p.error(f"--{name.replace('_', '-')} must be a number > 0, got {v}.")
    if args.tracers < 0:
        p.error(f"--tracers must be >= 0, got {args.tracers}.")
    return args


def main(argv=None, results_dir="results"):
    """Run the study as the command line ``argv`` says (``results_dir``: the folder of
    ``--out`` when not given); returns the result document."""
    args = parse_args(argv, results_dir)
    start = time.perf_counter()
    try:
        runs = plan(args)
    except (ConfigError, ValueError) as err:
        raise SystemExit(f"resolution_study: {err}") from None
    print_plan(runs)
    if args.list:
        return None
    device = resolve_device(args.device).kind
    old = {}
    if args.resume and os.path.exists(args.out):
        with open(args.out) as fh:
            old = json.load(fh).get("cases", {})
    now = datetime.datetime.now().isoformat(timespec="seconds")
    doc = {"tool": "resolution_study", "date": now,
           "device": device_name(device), **environment(), "args": vars(args),
           "levels_note": LATTICE_NOTE if args.lattice else LEVELS_NOTE,
           "tracers_note": TRACERS_NOTE, "definitions": DEFINITIONS, "cases": {}}
    md_path = os.path.splitext(args.out)[0] + ".md"
    print(f"writing {args.out} and {md_path} after every run", flush=True)
    for run in runs:
        case, level = run["case"], run["level"]
        entry = doc["cases"].setdefault(case, {"case_file": run["info"]["case_file"],
                                              "runs": {}})
        prev = old.get(case, {}).get("runs", {}).get(level)
        if prev and prev.get("complete") and json.loads(json.dumps(
                run["params"], default=jsonable)) == prev.get("params"):
            print(f"  {case} {level}: kept from {args.out}", flush=True)
            entry["runs"][level] = prev
        else:
            remaining = None if args.budget is None else \
                args.budget - (time.perf_counter() - start)
            if remaining is not None and remaining < 5:
                print(f"  {case} {level}: skipped, the budget is spent", flush=True)
                entry.setdefault("skipped", []).append(level)
                continue
            i = run["info"]
            print(f"  {case} {level}: {i['n_elements'] or 'lattice'} elements, sigma "
                  f"{i['sigma']:.4g}, "
                  f"{i['method']}, {i['steps']} steps ...", flush=True)
            res = run_one(run, args, remaining)
            entry["runs"][level] = res
            print(f"  {case} {level}: done in {res['wall_s']:.1f} s "
                  f"({fmt(res['step_ms'], '.1f')} ms/step): "
                  f"{json.dumps(res['quantities'], default=jsonable)}", flush=True)
        fine, medium = entry["runs"].get("fine"), entry["runs"].get("medium")
        if fine and medium:
            entry["spread_fine_medium"] = spread(fine["quantities"], medium["quantities"])
        write_json(args.out, doc)
        write_markdown(md_path, doc)
    print()
    for case, entry in doc["cases"].items():
        print(markdown(case, entry))
    print(f"total {time.perf_counter() - start:.1f} s; wrote {args.out} and {md_path}",
          flush=True)
    return doc

