"""Step time along a trajectory: the leapfrog case at GPU size run in blocks of steps.

What it measures: ``vortexsim.make_case("leapfrog")`` at bench_step's resolved-core size
(32 766 elements, 2^20 tracers, FMM tol 1e-6, float64), stepped at ``--dt`` (0.1, as
cases/leapfrog.toml) to ``--t-end`` (20) in blocks of ``--block`` steps (20, the depth
refresh); per block the mean step time (device synchronized at the block's ends), the
tree depth in use and the points' bounding-cube edge.  The step cost changes along the
trajectory as the rings travel and the tracers spread; this shows where.

Usage::

    python benchmarks/tools/step_trajectory.py [--label new]
    PYTHONPATH=old_tree python benchmarks/tools/step_trajectory.py --label old     # A/B
    python benchmarks/tools/step_trajectory.py --device cpu --n-phi 12 --layers 1 \\
        --tracers 256 --t-end 0.4 --block 2                                # smoke test

Options: --n-phi (129), --layers (7), --tracers (2^20), --dt (0.1), --t-end (20),
--block (20), --depth D (pin the tree depth of every step), --device, --out, --label.
Each row also holds the depth model's inputs at the block's end (near-field pairs and
occupied leaves per depth, ``depth_counts``).

Output: JSON (default ``benchmarks/results/step_trajectory_DATE[_LABEL].json``) with one
row per block, and a table printed last.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

# the shared helpers of benchmarks/performance/ (timing.py, bench_fmm.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "performance"))
import timing as T  # noqa: E402


def point_counts(sim):
    """The depth model's inputs at the current state: near-field pairs and occupied leaves
    of the level-uniform trees of depth 0..the deepest admissible (lists)."""
    fmm = getattr(sim.summation, "fmm", None)
    if fmm is None:
        return [], []
    xp = sim.device.xp
    x = sim.elements.x
    _, _, pairs, occupied = T.depth_model_inputs(
        fmm, x, xp.concatenate([x, sim.tracers.x]), sim.elements.sigma.max(), xp)
    return pairs, occupied


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n-phi", type=int, default=129)
    p.add_argument("--layers", type=int, default=7)
    p.add_argument("--tracers", type=int, default=1 << 20)
    p.add_argument("--dt", type=float, default=0.1)
    p.add_argument("--t-end", type=float, default=20.0)
    p.add_argument("--block", type=int, default=20)
    p.add_argument("--depth", type=int, default=None,
                   help="pin the FMM tree depth of every step (default: the model's)")
    T.add_common_options(p, "step_trajectory")
    args = p.parse_args(argv)
    import vortexsim
    dev = args.device
    sim = vortexsim.make_case("leapfrog", n_phi=args.n_phi, layers=args.layers,
                              layer_spacing=0.5, sigma=0.05,
                              tracers_per_ring=args.tracers // 2, dt=args.dt, device=dev,
                              method="fmm", tol=1e-6, progress=False)
    if args.depth is not None:
        T.pin_depth(sim, args.depth)
    sim.run(steps=2)                                 # compilation, caches
    rows = []
    n_steps = int(round(args.t_end / args.dt))
    done = 2
    while done < n_steps:
        k = min(args.block, n_steps - done)
        T.synchronize(dev)
        t0 = time.perf_counter()
        sim.run(steps=k)
        T.synchronize(dev)
        ms = (time.perf_counter() - t0) / k * 1e3
        done += k
        planner = sim.planner if hasattr(sim, "planner") else None
        depth = getattr(planner, "depth", None)
        box = getattr(planner, "box", None)
        edge = float(np.max(box[1] - box[0])) if box is not None else float("nan")
        pairs, occupied = point_counts(sim)
        rows.append(dict(t=float(sim.t), steps=k, ms_per_step=ms, depth=depth, cube=edge,
                         pairs=pairs, occupied=occupied))
        print(f"t = {sim.t:5.1f}: {ms:6.1f} ms/step, depth {depth}, cube {edge:.2f}, "
              f"pairs {[f'{v:.3g}' for v in pairs]}, occupied {occupied}", flush=True)
    total = sum(r["ms_per_step"] * r["steps"] for r in rows) / 1e3
    T.write_json(args, "step_trajectory", dev, dict(rows=rows, total_s=total),
                 [dict(what=f"leapfrog steps t=0..{args.t_end:g}", ms=total * 1e3,
                       err_u=None, err_grad=None, met=None, target=None)])
    print(f"\nsteps 2..{n_steps}: {total:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
