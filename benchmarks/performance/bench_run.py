"""A whole ``vortexsim run`` against its bare stepping, back to back.

What it measures: the wall time a user meets.  After a warm-up run to t_end/2 (the CUDA
kernels compile into CuPy's disk cache), it runs the same case through the CLI, in
fresh processes, ``--rounds`` times (2) in this order:

1. ``bare``: the run with its output cut to the minimum the CLI allows (one snapshot
   and one diagnostics row at t_end, no plot) — the stepping of the same trajectory;
2. ``full``: the run with the case file's output cadence (diagnostics rows,
   snapshots, plot.png), as a user runs it;

and reports, from each run log's last lines, the run's wall time ("ran N steps ... in
S s") and its breakdown, the ratio of the medians full / bare (the target:
≤ 1.25), and each round's full run over the bare run's steps alone (its "time: steps"
entry: the 200 bare RK4 steps of the same trajectory).  The
bare run's steps are the reference rather than 200 × one step at t = 0
(``bench_step.py``), because the step cost changes along the trajectory (tracers
spread over more leaves: on the H100 the leapfrog GPU run's steps took 55 ms at t = 0
and ~89 ms near t = 20).

Usage::

    python benchmarks/performance/bench_run.py                          # leapfrog --preset gpu, GPU
    python benchmarks/performance/bench_run.py --step --rounds 3        # + full / (200 × t = 0 step)
    python benchmarks/performance/bench_run.py --case collision --preset gpu
    python benchmarks/performance/bench_run.py --device cpu --preset "" --set n_phi=8 \\
        --set tracers_per_ring=16 --set t_end=0.5              # smoke test

Output: JSON (default ``benchmarks/results/bench_run_DATE[_LABEL].json``) with both run
logs' summaries, and a table printed last.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

import timing as T

RAN = re.compile(r"ran (\d+) steps .* in ([0-9.e+-]+) s")
STEPS = re.compile(r"time: steps ([0-9.e+-]+) s")


def run_once(args, extra, out_dir):
    """One ``vortexsim run`` in a fresh process; (its run log's last lines, process wall)."""
    cmd = [sys.executable, "-m", "vortexsim", "run", args.case, "--device", args.device,
           "--out", out_dir, "-q"]
    if args.preset:
        cmd += ["--preset", args.preset]
    for item in list(args.set or []) + extra:
        cmd += ["--set", item]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    with open(os.path.join(out_dir, "run.log")) as fh:
        lines = fh.read().splitlines()
    summary = [ln.split(": ", 1)[-1] for ln in lines
               if "ran " in ln or "time: " in ln or "output thread: " in ln]
    return summary, wall


def step_ms(device, out):
    """The median t = 0 step [ms] of the GPU-size leapfrog case at the run's dt (0.1):
    ``bench_step.py --dt 0.1`` in a fresh process (the criterion's 'bare RK4 step')."""
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, "bench_step.py"), "--dt", "0.1",
                    "--device", device, "--out", out], capture_output=True, text=True,
                   check=True)
    with open(out) as fh:
        return float(json.load(fh)["step_ms_median"])


def _match(summary, pattern, what):
    """The first match of ``pattern`` in the run log's lines ``summary``."""
    for line in summary:
        m = pattern.search(line)
        if m:
            return m
    raise ValueError(f"no {what} in the run log: {summary}")


def run_seconds(summary):
    """(steps, seconds) of the run log's "ran N steps ... in S s" line."""
    m = _match(summary, RAN, "'ran ... steps' line")
    return int(m.group(1)), float(m.group(2))


def steps_seconds(summary):
    """The seconds of the run log's "time: steps S s" entry (the steps alone; the log
    gives 3 digits, so ratios with it are good to ~0.5 %)."""
    return float(_match(summary, STEPS, "'time: steps' entry").group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="leapfrog")
    ap.add_argument("--preset", default="gpu", help="case-file preset ('' for none)")
    ap.add_argument("--set", action="append", help="KEY=VALUE, passed to both runs")
    ap.add_argument("--timeout", type=float, default=550.0, help="[s] per run")
    ap.add_argument("--rounds", type=int, default=2, help="bare, full pairs (after a warm-up)")
    ap.add_argument("--step", action="store_true",
                    help="before each round, time the t = 0 step (bench_step.py --dt 0.1) "
                         "and report full / (steps × that step), the step criterion")
    T.add_common_options(ap, "bench_run")
    args = ap.parse_args()
    rows = {"bare": [], "full": []}
    dry = subprocess.run([sys.executable, "-m", "vortexsim", "run", args.case, "--dry-run"]
                         + (["--preset", args.preset] if args.preset else [])
                         + sum((["--set", s] for s in args.set or []), []),
                         capture_output=True, text=True, check=True).stdout
    t_end = float(re.search(r"^t_end = ([0-9.e+-]+)", dry, re.M).group(1))
    # the output cadence at its minimum: one row and one snapshot, at t_end
    bare = [f"snapshot_interval={t_end}", f"diagnostics_interval={t_end}", "plot=false"]
    with tempfile.TemporaryDirectory() as tmp:
        # a full run of half the time first: the CUDA kernels compile into CuPy's disk
        # cache, so that no measured run pays for the compilation (the first process
        # would); half, so that the deeper trees of later times compile too (the
        # leapfrog GPU run's first depth-5 step, t = 8, took 1.0 s in a process after a
        # warm-up to t = 1)
        run_once(args, [f"t_end={t_end / 2}"], os.path.join(tmp, "warm-up"))
        for r in range(args.rounds):
            if args.step:
                rows.setdefault("step_ms", []).append(
                    step_ms(args.device, os.path.join(tmp, f"step{r}.json")))
                print(f" step ({r + 1}/{args.rounds}): {rows['step_ms'][-1]:.1f} ms at t = 0",
                      flush=True)
            for label, extra in (("bare", bare), ("full", [])):
                summary, wall = run_once(args, extra, os.path.join(tmp, f"{label}{r}"))
                steps, seconds = run_seconds(summary)
                rows[label].append({"steps": steps, "run_s": seconds, "process_s": wall,
                                    "steps_s": steps_seconds(summary), "log": summary})
                print(f"{label:>5} ({r + 1}/{args.rounds}): {steps} steps in {seconds:.2f} s "
                      f"(process {wall:.1f} s)\n   " + "\n   ".join(summary), flush=True)
    bare_s = float(np.median([row["run_s"] for row in rows["bare"]]))
    full_s = float(np.median([row["run_s"] for row in rows["full"]]))
    ratio = full_s / bare_s
    print(f"\nfull / bare = {full_s:.2f} s / {bare_s:.2f} s = {ratio:.3f} (medians of "
          f"{args.rounds}; target <= 1.25)")
    # each round's full run against the steps alone of the bare run before it: the
    # trajectory's own bare RK4 steps, summed
    own = [f["run_s"] / b["steps_s"] for f, b in zip(rows["full"], rows["bare"])]
    rows["full_over_bare_steps"] = own
    print("full / (the bare run's steps) per round: " + ", ".join(f"{v:.3f}" for v in own))
    if args.step:
        # each round's full run against the step measured just before it (the GPU's
        # speed drifts by up to 15 % over minutes: pairs, not medians of all)
        ratios = [row["run_s"] / (row["steps"] * 1e-3 * ms)
                  for row, ms in zip(rows["full"], rows["step_ms"])]
        rows["full_over_steps"] = ratios
        print("full / (steps × t = 0 step) per round: "
              + ", ".join(f"{v:.3f}" for v in ratios) + " (target <= 1.25)")
    T.write_json(args, "bench_run", args.device, {"case": args.case, "preset": args.preset,
                                                  "set": args.set, "runs": rows,
                                                  "bare_s": bare_s, "full_s": full_s,
                                                  "ratio": ratio},
                 summary=[{"what": f"vortexsim run {args.case} --preset {args.preset}: "
                                   f"full / bare output", "ms": 1e3 * full_s,
                           "target": "ratio <= 1.25", "met": ratio <= 1.25}])


if __name__ == "__main__":
    main()
