"""Bitwise A/B of a refactor on the CPU: dump outputs of one vortexsim tree, compare two dumps.

What it dumps (float64, CPU, fixed seeds):

* ``fmm``: u and ∇u of ``FMM.evaluate`` for every kernel × tol 1e-3, 1e-6, 1e-9 × tree
  uniform, adaptive, auto, on rings with tracers (∇u at the elements only) and on a
  Plummer cloud (self pairs excluded), and the derived ``config`` (about 5 minutes);
* ``runs``: 20 steps of every ring case with the direct sum and the FMM (plus adaptive dt
  with viscosity, and RK2 in float32): final state and diagnostics;
* ``cli``: two ``vortexsim run`` commands whose output intervals shorten steps: every
  snapshot's arrays and the diagnostics file.

Usage (the tree under test comes from PYTHONPATH; run outside any checkout)::

    PYTHONPATH=/path/to/old python benchmarks/bitwise.py save old.npz [--only fmm|runs|cli]
    PYTHONPATH=/path/to/new python benchmarks/bitwise.py save new.npz [--only ...]
    python benchmarks/bitwise.py compare old.npz new.npz    # "N keys, 0 differ", exit 0

``compare`` checks the parts present in both files byte for byte and exits 1 on any
difference.
"""
import os, subprocess, sys, tempfile, glob
import numpy as np

KERNELS = ("gaussian", "algebraic", "winckelmans", "polynomial", "singular")


def fmm_cases(out):
    from vortexsim.fmm.evaluator import FMM
    from vortexsim.inputs import rings, clustered
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


def _name(ds, name):
    """``name`` in ``ds``; the time coordinate is ``t`` from file format 4 on, ``time``
    before (the keys of the saved arrays keep "time" so that both versions compare)."""
    return "t" if name == "time" and "t" in ds.variables else name


def main():
    if sys.argv[1] == "save":
        out = {}
        only = sys.argv[3:] and sys.argv[4] if len(sys.argv) > 4 else None
        import vortexsim
        print("vortexsim from", vortexsim.__file__)
        for name, f in (("fmm", fmm_cases), ("runs", run_cases), ("cli", cli_cases)):
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
