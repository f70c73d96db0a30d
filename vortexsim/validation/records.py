"""Records of a validation or benchmark run: the device's name, the environment (which
vortexsim, its git commit, the libraries), the shared command-line options (``--device``,
``--out``, ``--label``) and the JSON result file with its ``summary`` rows.

The validation tools of this package and the benchmark scripts (``benchmarks/``) write
their result files through :func:`write_json`; ``results_dir`` is the folder of a file
whose ``--out`` is not given.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys

import numpy as np

__all__ = ["synchronize", "free_gpu_memory", "to_host", "add_common_options", "device_name",
           "environment", "out_path", "write_json", "jsonable", "fmt"]


def synchronize(device):
    """Wait for the GPU (no-op on the CPU)."""
    if device == "gpu":
        import cupy as cp
        cp.cuda.Device().synchronize()


def free_gpu_memory(device):
    """Return CuPy's pooled blocks to the driver between cases (no-op on the CPU)."""
    if device == "gpu":
        import cupy as cp
        cp.get_default_memory_pool().free_all_blocks()
        cp.get_default_pinned_memory_pool().free_all_blocks()


def to_host(a):
    """A NumPy copy of a NumPy or CuPy array (None stays None)."""
    if a is None:
        return None
    return a.get() if hasattr(a, "get") else np.asarray(a)


def add_common_options(parser, tool, device_default="gpu", results_dir="results"):
    """``--device``, ``--out``, ``--label`` of every tool."""
    parser.add_argument("--device", choices=("gpu", "cpu"), default=device_default,
                        help=f"where vortexsim computes (default {device_default})")
    parser.add_argument("--out", default=None,
                        help=f"JSON path (default {results_dir}/{tool}_DATE[_LABEL].json)")
    parser.add_argument("--label", default="",
                        help="free text stored in the JSON and the file name, e.g. 'old' / 'new'")


def device_name(device):
    """The GPU's name, or the CPU's model and core count."""
    if device == "gpu":
        import cupy as cp
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else name
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model} ({os.cpu_count()} cores)"


def environment():
    """Which vortexsim ran (path, version, git commit of its tree) and the libraries."""
    import vortexsim
    path = os.path.dirname(os.path.abspath(vortexsim.__file__))
    try:
        commit = subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", path, "status", "--porcelain", "--", "."],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        commit = (commit + ("+dirty" if dirty else "")) or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    env = dict(vortexsim_path=path, vortexsim_version=getattr(vortexsim, "__version__", None),
               vortexsim_commit=commit, python=platform.python_version(),
               numpy=np.__version__, argv=sys.argv)
    try:
        import cupy
        env["cupy"] = cupy.__version__
    except ImportError:
        pass
    return env


def out_path(args, tool, results_dir="results"):
    """``--out`` or ``results_dir``/TOOL_DATE[_LABEL].json."""
    if args.out:
        return args.out
    label = "".join(c if c.isalnum() or c in "-_." else "-" for c in args.label)
    name = f"{tool}_{datetime.date.today().isoformat()}" + (f"_{label}" if label else "")
    return os.path.join(results_dir, name + ".json")


def write_json(args, tool, device, payload, summary, results_dir="results"):
    """Write ``payload`` with date, tool, label, device, environment and ``summary`` rows.

    ``summary``: short rows (dicts with ``what``, ``ms``, ``err_u``, ``err_grad``,
    ``target``, ``met``) that ``benchmarks/performance/timing.py`` tabulates across tools.
    """
    path = out_path(args, tool, results_dir)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    meta = dict(tool=tool, date=datetime.datetime.now().isoformat(timespec="seconds"),
                label=args.label, device=device_name(device), **environment(),
                summary=summary, **payload)
    with open(path, "w") as fh:
        json.dump(meta, fh, indent=1, default=jsonable)
    print(f"\nwrote {path}")
    return path


def jsonable(v):
    """``v`` as a JSON value: NumPy scalars and arrays as numbers and lists, else str."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def fmt(v, spec):
    """``format(v, spec)``, or '–' for None."""
    return "–" if v is None else format(v, spec)
