"""The CPU threads of the computation: one setting that every threaded CPU part obeys.

:func:`cpu_threads` is the count the CPU parts use: SciPy's FFTs of the periodic lattice
(:mod:`vortexsim.geometry.lattice_modes`), FINUFFT's type-2 transforms of the spectral sum
(at most :data:`vortexsim.summation.spectral.TYPE2_THREADS`), the FMM's near-field thread
pool.  By default it is the number of cores this process may actually use
(:func:`available_cores`: its CPU affinity, within a cgroup's CPU quota, as containers and
batch schedulers set them; at most ``OMP_NUM_THREADS`` where that is set);
``vortexsim run --threads N`` (or :func:`set_cpu_threads`) sets it.  NumPy's BLAS is not on a hot path of vortexsim (its few matrix products are
small) and keeps its own setting (``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS``).
"""
from __future__ import annotations

import math
import os

__all__ = ["available_cores", "cpu_threads", "set_cpu_threads"]

_threads = None


def _cgroup_quota(path="/sys/fs/cgroup/cpu.max"):
    """The cgroup v2 CPU quota in cores (``max`` or unreadable: None)."""
    try:
        with open(path) as fh:
            quota, period = fh.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, math.ceil(int(quota) / int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def available_cores():
    """The cores this process may use: its CPU affinity (``os.sched_getaffinity``; else
    ``os.cpu_count``), at most the cgroup's CPU quota rounded up; at least 1."""
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
             else os.cpu_count() or 1)
    quota = _cgroup_quota()
    return max(1, min(cores, quota) if quota else cores)


def cpu_threads():
    """The threads of the CPU parts: :func:`set_cpu_threads`'s count, else
    :func:`available_cores`, at most ``OMP_NUM_THREADS`` where that is set (the setting
    OpenMP libraries such as FINUFFT obey, and warn when asked for more)."""
    if _threads is not None:
        return _threads
    cores = available_cores()
    try:
        omp = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return cores
    return max(1, min(cores, omp))


def set_cpu_threads(n):
    """Use ``n`` threads (an integer ≥ 1) in the CPU parts from now on; None: the default
    (:func:`available_cores`)."""
    global _threads
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
        raise ValueError(f"threads must be a whole number >= 1, got {n!r}.")
    _threads = n
