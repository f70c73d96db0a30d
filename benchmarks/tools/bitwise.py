"""Bitwise A/B of a refactor on the CPU: dump outputs of one vortexsim tree, compare two dumps.

What it dumps (float64, CPU, fixed seeds):

* ``fmm``: u and ∇u of ``FMM.evaluate`` for every kernel × tol 1e-3, 1e-6, 1e-9 × tree
  uniform, adaptive, auto, on rings with tracers (∇u at the elements only) and on a
  Plummer cloud (self pairs excluded), and the derived ``config`` (about 5 minutes);
* ``runs``: 20 steps of every ring case with the direct sum and the FMM (plus adaptive dt
  with viscosity, and RK2 in float32): final state and diagnostics;
* ``cli``: two ``vortexsim run`` commands whose output intervals shorten steps: every
  snapshot's arrays and the diagnostics file;
* ``periodic``: Taylor–Green and isotropic turbulence in the periodic box at n = 8 and 16
  (spectral sum; one periodic FMM run) with remeshing alone (ν = 0, every step and every
  second step), the lattice viscosity and PSE: the final state and diagnostics after a
  few steps, and the same run restarted from ``checkpoint_state()`` in a freshly built
  simulation (its final state must equal the uninterrupted run's: compare the
  ``.../full/...`` and ``.../restart/...`` keys); and a ``vortexsim run taylor_green``
  restarted from its middle snapshot with ``vortexsim restart`` (about 30 s in all).

Usage (the tree under test comes from PYTHONPATH; run outside any checkout)::

    PYTHONPATH=/path/to/old python benchmarks/tools/bitwise.py save old.npz [--only fmm|runs|cli|periodic]
    PYTHONPATH=/path/to/new python benchmarks/tools/bitwise.py save new.npz [--only ...]
    python benchmarks/tools/bitwise.py compare old.npz new.npz    # "N keys, 0 differ", exit 0

``compare`` checks the parts present in both files byte for byte and exits 1 on any
difference.  ``compare-runs RUN_A RUN_B`` compares two run directories (e.g. a run and a
``vortexsim restart --out RUN_B`` of one of its snapshots): every variable of each
``snapshot_*.nc``, ``diagnostics.nc`` and ``spectra.nc`` of RUN_B that RUN_A also holds,
byte for byte (RUN_B's diagnostics rows against RUN_A's rows of the same times); exit 1
on any difference.
"""
import os, subprocess, sys, tempfile, glob
import numpy as np

KERNELS = ("gaussian", "algebraic", "winckelmans", "polynomial", "singular")


def fmm_cases(out):
    from vortexsim.fmm.evaluator import FMM
    try:
        from vortexsim.inputs import rings, clustered
    except ImportError:  # the restructured package
        from vortexsim.cases.inputs import rings, clustered
    rng = np.random.default_rng(7)
    xr, ar, tr = rings(2400, 1600, rng)
    xc, ac, _ = clustered(6000, np.random.default_rng(8))
    for kernel in KERNELS:
        for tol in (1e-3, 1e-6, 1e-9):
            for tree in ("uniform", "adaptive", "auto"):
                if tree == "adaptive" and kernel in ("algebraic", "winckelmans"):
                    pass  # falls back to uniform inside; still record
                for name, (x, a, t) in (("rings", (xr, ar, tr)), ("clustered", (xc, ac, None))):
                    sigma = 0.02 if name == "rings" else 0.01
                    key = f"fmm/{kernel}/{tol:g}/{tree}/{name}"
                    try:
                        f = FMM(kernel, tol=tol, device="cpu", tree=tree)
                        if t is None:
                            u, g = f.evaluate(x, a, np.full(len(x), sigma))
                        else:
                            y = np.concatenate([x, t])
                            u, g = f.evaluate(x, a, np.full(len(x), sigma), y, gradient=len(x))
                        out[key + "/u"] = u
                        out[key + "/g"] = g
                        out[key + "/cfg"] = np.array(str(f.config))
                    except Exception as exc:  # record the error text
                        out[key + "/err"] = np.array(f"{type(exc).__name__}: {exc}")
                    print(key, flush=True)


def run_cases(out):
    import vortexsim
    specs = []
    for case in ("single_ring", "leapfrog", "collision", "oblique_collision", "ring_ground"):
        specs.append((case, "direct", {}))
        specs.append((case, "fmm", {}))
    specs.append(("leapfrog", "fmm-adaptive-nu", {"adaptive": True, "nu": 1e-3}))
    specs.append(("collision", "direct-rk2-f32", {"integrator": "rk2", "precision": "float32"}))
    for case, label, extra in specs:
        method = "fmm" if label.startswith("fmm") else "direct"
        sim = vortexsim.make_case(case, n_phi=16, tracers_per_ring=64, device="cpu",
                                  method=method, progress=False, **extra)
        sim.run(steps=20)
        st = sim.state_dict()
        key = f"run/{case}/{label}"
        for k in ("x", "alpha", "sigma"):
            out[f"{key}/el_{k}"] = st["elements"][k]
        out[f"{key}/tr_x"] = st["tracers"]["x"]
        out[f"{key}/scalars"] = np.array([st["t"], st["iteration"], st["dt"]])
        d = sim.diagnostics()
        for k, v in d.items():
            if k != "ring_names":
                out[f"{key}/diag_{k}"] = np.asarray(v)
        print(key, flush=True)


def cli_cases(out):
    import xarray as xr
    for case, sets in (("single_ring", ["snapshot_interval=0.13", "diagnostics_interval=0.07"]),
                       ("ring_ground", ["snapshot_interval=0.5", "diagnostics_interval=0.25",
                                        "method=fmm"])):
        d = tempfile.mkdtemp()
        args = [sys.executable, "-m", "vortexsim", "run", case, "--set", "n_phi=8",
                "--set", "tracers_per_ring=16", "--set", "plot=false", "--device", "cpu",
                "-q", "--t-end", "1.0", "--out", d + "/r"]
        for s in sets:
            args += ["--set", s]
        subprocess.run(args, check=True)
        files = sorted(glob.glob(d + "/r/snapshot_*.nc"))
        out[f"cli/{case}/files"] = np.array([os.path.basename(f) for f in files])
        for f in files:
            with xr.open_dataset(f) as ds:
                for v in ("element_x", "element_alpha", "tracer_x", "time", "dt_next"):
                    out[f"cli/{case}/{os.path.basename(f)}/{v}"] = ds[_name(ds, v)].values
        with xr.open_dataset(d + "/r/diagnostics.nc") as ds:
            for v in ds.data_vars:
                if ds[v].dtype.kind in "fi":
                    out[f"cli/{case}/diag/{v}"] = ds[v].values
            out[f"cli/{case}/diag/time"] = ds[_name(ds, "time")].values
        print(f"cli/{case}", flush=True)


def dump_state(out, key, sim):
    """The final state arrays and the diagnostics of ``sim`` under ``key``."""
    st = sim.state_dict()
    for k, v in st["elements"].items():
        out[f"{key}/el_{k}"] = np.asarray(v)
    out[f"{key}/tr_x"] = np.asarray(st["tracers"]["x"])
    out[f"{key}/scalars"] = np.array([st["t"], st["iteration"], st["dt"], *st["sigma_range"]])
    out[f"{key}/groups"] = np.array(repr(st["groups"]))
    for k, v in sim.diagnostics().items():
        v = np.asarray(v)
        out[f"{key}/diag_{k}"] = v if v.dtype.kind in "fiub" else np.array(repr(v.tolist()))


PERIODIC = (  # (label, case, parameters); the case's defaults otherwise
    ("tg8-remesh", "taylor_green", dict(n=8, nu=0.0)),
    ("tg8-remesh2", "taylor_green", dict(n=8, nu=0.0, viscous="pse", remesh_every=2)),
    ("tg8-lattice", "taylor_green", dict(n=8, viscous="lattice")),
    ("tg8-lattice-rk4-f32", "taylor_green", dict(n=8, viscous="lattice", integrator="rk4",
                                                 precision="float32")),
    ("tg16-pse", "taylor_green", dict(n=16, viscous="pse", tracers=50)),
    ("tg8-fmm", "taylor_green", dict(n=8, overlap=0.5, method="fmm", kernel="gaussian")),
    ("iso16-remesh", "isotropic_turbulence", dict(n=16, nu=0.0)),
    ("iso16-lattice", "isotropic_turbulence", dict(n=16, viscous="lattice")),
    ("iso16-pse", "isotropic_turbulence", dict(n=16, viscous="pse", adaptive=True)),
)


def periodic_cases(out):
    import copy
    import vortexsim
    steps, first = 4, 2
    for label, case, params in PERIODIC:
        key = f"periodic/{case}/{label}"

        def build():
            return vortexsim.make_case(case, device="cpu", progress=False, **params)
        try:
            sim = build()
            sim.run(steps=steps)
            dump_state(out, key + "/full", sim)
            part = build()
            part.run(steps=first)
            checkpoint = copy.deepcopy(part.checkpoint_state())
            del part
            sim = build()
            sim.pickup(checkpoint)
            sim.run(steps=steps - first)
            dump_state(out, key + "/restart", sim)
        except Exception as exc:  # record the error text
            out[key + "/err"] = np.array(f"{type(exc).__name__}: {exc}")
        print(key, flush=True)
    periodic_cli(out)


def periodic_cli(out):
    """``vortexsim run taylor_green`` (n = 8, 6 steps, snapshots every 2), then ``vortexsim
    restart`` of its snapshot at iteration 2 into a new directory: every snapshot of both
    and both diagnostics files."""
    d = tempfile.mkdtemp()
    base = [sys.executable, "-m", "vortexsim"]
    subprocess.run(base + ["run", "taylor_green", "--set", "n=8", "--set", "t_end=0.6",
                           "--set", "snapshot_interval=0.2", "--set", "diagnostics_interval=0.1",
                           "--device", "cpu", "-q", "--out", d + "/run"], check=True)
    subprocess.run(base + ["restart", d + "/run/snapshot_00000002.nc", "-q",
                           "--out", d + "/restart"], check=True)
    for run in ("run", "restart"):
        key = f"periodic/cli/taylor_green/{run}"
        files = sorted(glob.glob(f"{d}/{run}/snapshot_*.nc"))
        out[f"{key}/files"] = np.array([os.path.basename(f) for f in files])
        for f in files:
            with xr_open(f) as ds:
                for v in ("element_x", "element_alpha", "element_sigma", "element_volume",
                          "tracer_x", "time", "dt_next"):
                    out[f"{key}/{os.path.basename(f)}/{v}"] = ds[_name(ds, v)].values
        with xr_open(f"{d}/{run}/diagnostics.nc") as ds:
            for v in ds.data_vars:
                if ds[v].dtype.kind in "fi":
                    out[f"{key}/diag/{v}"] = ds[v].values
            out[f"{key}/diag/time"] = ds[_name(ds, "time")].values
    print("periodic/cli/taylor_green", flush=True)


def xr_open(path):
    import xarray as xr
    return xr.open_dataset(path)


def _name(ds, name):
    """``name`` in ``ds``; the time coordinate is ``t`` from file format 4 on, ``time``
    before (the keys of the saved arrays keep "time" so that both versions compare)."""
    return "t" if name == "time" and "t" in ds.variables else name


def compare_runs(dir_a, dir_b):
    """Number of differing variables of the files in ``dir_b`` that ``dir_a`` also has."""
    import xarray as xr
    names = sorted(os.path.basename(f) for f in glob.glob(os.path.join(dir_b, "*.nc")))
    bad = checked = 0
    for name in names:
        fa, fb = os.path.join(dir_a, name), os.path.join(dir_b, name)
        if not os.path.exists(fa):
            print("MISSING in", dir_a, name); bad += 1; continue
        with xr.open_dataset(fa, decode_cf=False) as a, xr.open_dataset(fb, decode_cf=False) as b:
            if name.startswith("snapshot_"):
                pairs = [(a, b)]
            else:  # rows: RUN_B's times are a tail of RUN_A's
                tname = _name(b, "time")
                rows = np.isin(a[tname].values, b[tname].values)
                if rows.sum() != b.sizes[a[tname].dims[0]]:
                    print("ROWS", name, "times of", dir_b, "not all in", dir_a); bad += 1
                    continue
                pairs = [(a.isel({a[tname].dims[0]: np.flatnonzero(rows)}), b)]
            for x, y in pairs:
                for v in sorted(set(x.variables) | set(y.variables)):
                    checked += 1
                    if v not in x.variables or v not in y.variables:
                        print("MISSING", name, v, v in x.variables, v in y.variables); bad += 1
                    elif x[v].values.tobytes() != y[v].values.tobytes() \
                            or x[v].dtype != y[v].dtype:
                        print("DIFF", name, v); bad += 1
    print(f"{len(names)} files, {checked} variables, {bad} differ")
    return bad


def main():
    if sys.argv[1] == "compare-runs":
        sys.exit(1 if compare_runs(sys.argv[2], sys.argv[3]) else 0)
    if sys.argv[1] == "save":
        out = {}
        only = sys.argv[3:] and sys.argv[4] if len(sys.argv) > 4 else None
        import vortexsim
        print("vortexsim from", vortexsim.__file__)
        for name, f in (("fmm", fmm_cases), ("runs", run_cases), ("cli", cli_cases),
                        ("periodic", periodic_cases)):
            if only in (None, name):
                f(out)
                np.savez(sys.argv[2] + ".part.npz", **out)
        os.replace(sys.argv[2] + ".part.npz", sys.argv[2])
    else:
        a, b = np.load(sys.argv[2]), np.load(sys.argv[3])
        parts = {k.split("/")[0] for k in b.files} & {k.split("/")[0] for k in a.files}
        keys = sorted(k for k in set(a.files) | set(b.files) if k.split("/")[0] in parts)
        bad = 0
        for k in keys:
            if k not in a.files or k not in b.files:
                print("MISSING", k, k in a.files, k in b.files); bad += 1; continue
            x, y = a[k], b[k]
            same = x.shape == y.shape and x.dtype == y.dtype and (
                x.tobytes() == y.tobytes() if x.dtype.kind in "fiub" else np.array_equal(x, y))
            if not same:
                bad += 1
                print("DIFF", k, x.dtype, x.shape, y.dtype, y.shape,
                      (np.nanmax(np.abs(x - y)) if x.dtype.kind == "f" and x.shape == y.shape else ""))
        print(f"{len(keys)} keys, {bad} differ")
        sys.exit(1 if bad else 0)


main()
