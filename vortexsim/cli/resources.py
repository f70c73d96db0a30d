r"""What a run will cost, checked before anything is allocated or written.

``vortexsim run`` (and ``restart``, with the configuration stored in the snapshot)
calls these before it builds the case, so that a request the machine cannot serve ends
with one line (exit 2) instead of a traceback or the kernel's OOM killer, and a schedule
that would never end or would flood the disk is refused unless the user insists
(``--force``).

* **Memory** (:func:`check_resources`): the problem size from the case parameters
  without building it (:func:`problem_size`: a case built at the smallest size, scaled
  by ``n_phi``, the core layers and ``tracers_per_ring``), the memory of the run on its
  device (:func:`estimate_memory`: host memory on the CPU; GPU memory and the host copies
  of the output on the GPU) against what the machine has (:func:`available_memory`:
  ``MemAvailable`` of ``/proc/meminfo`` within the cgroup's limit, the free memory of
  the GPU: :mod:`vortexsim.backend.memory`) or the user's ``--max-memory``.
* **Schedule** (:func:`check_schedule`): steps, snapshot files and diagnostics rows of
  the run, bounded by :data:`MAX_STEPS`, :data:`MAX_SNAPSHOTS` and
  :data:`MAX_DIAGNOSTICS_ROWS` (``force=True`` lifts these), and never more than
  :data:`HARD_LIMIT` (not counted exactly any more; ``force`` does not lift it).
* **Disk** (:func:`check_disk`): the bytes the snapshots and the diagnostics file will
  take against the free space of the output directory's file system.

The memory model (bytes per element, per tracer, a fixed part; the bytes per element and
per grid point are the summations' own, as in
:meth:`vortexsim.summation.Summation.memory_estimate`; for the periodic spectral sum 2 kB
per element and 64 B per point of its NUFFT's fine grid) is an upper estimate
measured on the CPU (2 cores, peak RSS of ``vortexsim run single_ring --steps 1``): about
150 MB for the interpreter, NumPy, xarray and netCDF; about 300 MB more for the FMM's
operator caches; per element about 1 kB with the direct sum and 1 to 10 kB with the FMM
(a degenerate single-layer ring of 40 000 elements: 10 kB); per tracer 250 B (direct) to
500 B (FMM).  It is meant to refuse what cannot fit (``n_phi = 1e9``: terabytes), not to
predict the peak to a few per cent.

Errors are :class:`ResourceError` (a ``ValueError``) with a one-line message that says
the estimate and the bound.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil

__all__ = ["ResourceError", "Estimate", "MAX_STEPS", "MAX_SNAPSHOTS", "MAX_DIAGNOSTICS_ROWS",
           "HARD_LIMIT", "problem_size", "estimate_memory", "available_memory",
           "check_resources", "check_schedule", "check_disk", "parse_size", "format_bytes",
           "cpu_seconds", "announce_cpu_cost", "CASE_CPU_SECONDS", "split_fraction",
           "per_rank", "SPLIT_REPLICATED", "spill_bytes"]

#: most time steps of a run without ``--force`` (10^7: hours at the smallest sizes on a GPU)
MAX_STEPS = 10 ** 7
#: most snapshot files of a run without ``--force``
MAX_SNAPSHOTS = 10 ** 4
#: most rows of ``diagnostics.nc`` without ``--force``; the file is rewritten whole (at
#: most every 2 s of wall time and before each snapshot), so its cost grows with rows ×
#: rewrites, and 10^5 rows rewritten at every row would write terabytes in total
MAX_DIAGNOSTICS_ROWS = 10 ** 5
#: counts beyond which nothing is run, even with ``--force`` (2^53: step and schedule
#: indices are no longer exact as floats; ``t_end = 1e308`` with ``dt = 0.05``)
HARD_LIMIT = 2 ** 53

#: memory model [bytes]: a fixed part; per element (with its images), per tracer and per
#: point of the spectral sum's NUFFT grid, the summation's own (``BYTES_PER_SOURCE``,
#: ``BYTES_PER_TARGET``, ``BYTES_PER_GRID_POINT`` of :data:`vortexsim.summation.SUMMATIONS`)
_FIXED_HOST = 500 * 10 ** 6
_FIXED_GPU = 300 * 10 ** 6
#: host bytes per element and tracer of a GPU run (state copies of the queued snapshots)
_HOST_PER_POINT_GPU = 200
#: disk: bytes per element and tracer of a snapshot (7 and 3 float64 values), a fixed part
#: per snapshot (attributes with the config text, netCDF/HDF5 headers), bytes per row of
#: diagnostics.nc per ring group and its fixed part
_SNAPSHOT_FIXED = 64_000
_ROW_BYTES = 1_000


class ResourceError(ValueError):
    """A run that needs more memory, time steps, files or disk space than allowed."""


@dataclasses.dataclass(frozen=True)
class Estimate:
    """The size and memory of a run.

    n_elements, n_tracers, n_sources : int (sources: the elements and their images)
    device : "cpu" | "gpu"
    host_bytes : int, host memory; device_bytes : int, GPU memory (0 on the CPU)
    """

    n_elements: int
    n_tracers: int
    n_sources: int
    device: str
    host_bytes: int
    device_bytes: int


def format_bytes(n):
    """``15.6 GB`` (decimal units, 3 significant digits)."""
    n = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB", "PB", "EB"):
        if abs(n) < 1000 or unit == "EB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.3g} EB"  # pragma: no cover


_UNITS = {"": 1, "b": 1, "k": 10 ** 3, "kb": 10 ** 3, "m": 10 ** 6, "mb": 10 ** 6,
          "g": 10 ** 9, "gb": 10 ** 9, "t": 10 ** 12, "tb": 10 ** 12, "kib": 2 ** 10,
          "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}


def parse_size(text):
    """Bytes of a size such as ``8GB``, ``8 GiB``, ``512M``, ``1e9`` (k, M, G, T and kB,
    MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB powers of 1024).  ValueError for
    anything else or a size ≤ 0."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = m and m.group(2).lower()
    if not m or unit not in _UNITS:
        raise ValueError(f"expected a size such as 8GB, 512MB or 16GiB, got {text!r}.")
    value = float(m.group(1)) * _UNITS[unit]
    if not (math.isfinite(value) and value >= 1):
        raise ValueError(f"expected a size of at least 1 byte, got {text!r}.")
    return int(value)


def _count(value):
    """``value`` as a non-negative int, or None when it is not a whole number ≥ 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value == int(value)):
        return None
    return int(value) if value >= 0 else None


def problem_size(config):
    """(elements, tracers, sources) of the case of ``config`` (``{"case": name, key:
    value, ...}``, missing keys taking the case's defaults), or None when they cannot be
    told without building it (a case without ``n_phi``, or values the builder will
    reject anyway).

    The case is built at its smallest size (``n_phi = 3``, one layer, one tracer per
    ring), which gives the number of rings and of tracer sets; the sizes follow from
    ``n_phi``, ``layers``, ``core`` and ``tracers_per_ring``.  Sources are the elements,
    twice with a ground plane (the images).  Raises what the builder raises for values it
    rejects (ValueError, TypeError).
    """
    from ..cases import get_case  # noqa: PLC0415
    from ..cases.rings import cross_section_size  # noqa: PLC0415

    case = get_case(config["case"])
    defaults = case.params()
    size = getattr(case.builder, "size", None)           # a case that tells its own size
    if size is not None:
        n, m = size({k: config.get(k, v) for k, v in defaults.items()})
        return n, m, n
    if "n_phi" not in defaults:
        return None
    values = {k: config.get(k, v) for k, v in defaults.items()}
    n_phi = _count(values["n_phi"])
    layers = _count(values.get("layers", 1))
    per_ring = _count(values.get("tracers_per_ring", 0))
    if n_phi is None or n_phi < 3 or layers is None or layers < 1 or per_ring is None:
        return None
    probe = dict(values, n_phi=3)
    if "layers" in probe:
        probe["layers"] = 1
    if "tracers_per_ring" in probe:
        probe["tracers_per_ring"] = 1
    setup = case.builder(**probe)
    rings = len(setup.x) // 3
    n_elements = rings * n_phi * cross_section_size(values.get("core", 0), layers)
    n_tracers = len(setup.tracers) * per_ring if "tracers_per_ring" in probe \
        else len(setup.tracers)
    boundary = config.get("boundary", case.run_defaults.get("boundary", "free"))
    n_elements = max(n_elements, rings * _remeshed_ring_nodes(values, config, boundary))
    n_sources = n_elements * (2 if boundary == "ground" else 1)
    return n_elements, n_tracers, n_sources


#: the largest growth of a ring's radius that the memory estimate of a remeshed ring case
#: allows for (a ring spreading on the ground reaches 3.3 R by t = 10)
REMESH_RADIUS_GROWTH = 4.0


def _remeshed_ring_nodes(values, config, boundary):
    """An upper bound on the lattice nodes one ring holds when free-space remeshing is on
    (0 when it is off or the values do not tell): the nodes of a torus of major radius
    ``REMESH_RADIUS_GROWTH`` × R and tube radius k·a + 2h, with a = sqrt(core² + σ²) the
    effective core (σ = remesh_overlap × h), k = sqrt(2 ln(1/remesh_threshold)) where a
    Gaussian core falls below the threshold, and 2h the M4′ stencil's reach:
    2π² R_max (k a + 2h)² / h³."""
    every = config.get("remesh_every", values.get("remesh_every", 0))
    h = config.get("remesh_spacing", values.get("remesh_spacing"))
    if boundary == "periodic" or not every or not isinstance(h, (int, float)) or h <= 0:
        return 0
    overlap = config.get("remesh_overlap", values.get("remesh_overlap", 1.0))
    overlap = overlap if isinstance(overlap, (int, float)) and overlap > 0 else 1.0
    threshold = config.get("remesh_threshold", values.get("remesh_threshold", 1e-6))
    threshold = threshold if isinstance(threshold, (int, float)) and 0 < threshold < 1 \
        else 1e-16
    core, radius = values.get("core", 0.0), values.get("radius", 1.0)
    if not (isinstance(core, (int, float)) and isinstance(radius, (int, float))):
        return 0
    a = math.hypot(core, overlap * h)
    tube = math.sqrt(2 * math.log(1 / threshold)) * a + 2 * h
    return int(2 * math.pi ** 2 * REMESH_RADIUS_GROWTH * radius * tube ** 2 / h ** 3)


def estimate_memory(config, device="auto"):
    """The :class:`Estimate` of the run of ``config`` on ``device`` ("cpu", "gpu",
    "auto" or a Device), or None when its size cannot be told (:func:`problem_size`)."""
    size = problem_size(config)
    if size is None:
        return None
    n_elements, n_tracers, n_sources = size
    from ..backend import device_kind  # noqa: PLC0415
    kind = device_kind(device)
    from ..summation import SUMMATIONS  # noqa: PLC0415
    method = _method(config)
    summation = SUMMATIONS[method]
    work = summation.BYTES_PER_SOURCE * n_sources + summation.BYTES_PER_TARGET * n_tracers
    if method == "spectral":
        work += summation.BYTES_PER_GRID_POINT * _spectral_grid_points(config)
    elif method == "mesh":                    # the remeshing lattice's n³ points
        n = _count(config.get("n"))
        work += summation.BYTES_PER_GRID_POINT * (n ** 3 if n else 0)
    if kind == "gpu":
        host = _FIXED_HOST + _HOST_PER_POINT_GPU * (n_elements + n_tracers)
        return Estimate(n_elements, n_tracers, n_sources, kind, host, _FIXED_GPU + work)
    return Estimate(n_elements, n_tracers, n_sources, kind, _FIXED_HOST + work, 0)


#: the part of a one-rank run's estimated GPU memory that each rank of a periodic run
#: split by slabs still holds (the replicated lattice work, the CUDA context, NCCL's
#: buffers; the cases are built by slabs), set so that the estimate bounds the busiest
#: GPU measured on 4 × H200 (nvidia-smi; isotropic turbulence, --preset gpu) with a few
#: per cent to spare: 512³ 30.9 GB of an estimated 67.4 GB for one rank (0.458 = 0.278
#: + 0.722 / 4); 768³ 99.8 GB of 226.8 GB (0.440 = 0.253 + 0.747 / 4); 0.30 gives
#: 32.0 and 107.7 GB.  (One GPU at 512³: 74.7 GB.)
SPLIT_REPLICATED = 0.30


def split_fraction(config, ranks):
    """The fraction of the one-rank memory (its work part) that each of ``ranks`` ranks
    holds: for a run whose state the ranks split by slabs
    (:func:`vortexsim.model.slab_partition.splits_by_slabs`, "auto" resolved)
    :data:`SPLIT_REPLICATED` + the rest / ranks; else 1 (every rank holds the whole
    state)."""
    from ..model.slab_partition import splits_by_slabs  # noqa: PLC0415
    n = _count(config.get("n"))
    if not n or not splits_by_slabs({**config, "n": n, "method": _method(config)}, ranks):
        return 1.0
    return SPLIT_REPLICATED + (1.0 - SPLIT_REPLICATED) / ranks


def per_rank(est, fraction):
    """The :class:`Estimate` of one rank that holds ``fraction`` of the work memory of
    ``est`` (:func:`split_fraction`; the fixed part stays whole): the GPU's on the GPU,
    the host's on the CPU."""
    if fraction >= 1:
        return est
    if est.device == "gpu":
        return dataclasses.replace(est, device_bytes=int(
            _FIXED_GPU + (est.device_bytes - _FIXED_GPU) * fraction))
    return dataclasses.replace(est, host_bytes=int(
        _FIXED_HOST + (est.host_bytes - _FIXED_HOST) * fraction))


def _method(config):
    """"direct", "fmm", "spectral" or "mesh": the summation whose memory the run needs ("auto" in
    a periodic box: :func:`vortexsim.summation.auto.choose_method`; elsewhere the FMM)."""
    from ..summation.auto import choose_method  # noqa: PLC0415
    method = config.get("method", "direct")
    if method == "auto" and config.get("boundary") == "periodic":
        try:
            method = choose_method(periodic=True, kernel=config.get("kernel", "gaussian"))
        except ValueError:               # a kernel the box refuses: the run will say so
            method = "fmm"
    return method if method in ("direct", "spectral", "mesh") else "fmm"


def _spectral_grid_points(config):
    """Points of the own NUFFT's fine grid for the lattice cases of the periodic box
    (``n`` nodes per side, σ = ``overlap`` × box/n): those of the
    :class:`vortexsim.summation.spectral.SpectralSum` and its :class:`vortexsim.kernels.nufft.PeriodicNufft`
    that the run will make; 0 where the config does not tell σ."""
    from ..kernels.cutoff import GAUSSIAN_ORDERS  # noqa: PLC0415
    from ..kernels.nufft import PeriodicNufft  # noqa: PLC0415
    from ..summation.spectral import SpectralSum  # noqa: PLC0415
    n, box = _count(config.get("n")), config.get("box")
    overlap, tol = config.get("overlap", 1.0), config.get("tol", 1e-6)
    if isinstance(config.get("remesh_overlap"), (int, float)) and config.get("remesh_every"):
        overlap = min(overlap, config["remesh_overlap"])    # the core after a remeshing
    order = GAUSSIAN_ORDERS.get(config.get("kernel", "gaussian"))
    if not (n and isinstance(box, (int, float)) and isinstance(overlap, (int, float))
            and isinstance(tol, (int, float)) and order and box > 0 and overlap > 0
            and 0 < tol < 1):
        return 0
    spectral = SpectralSum(float(box), overlap * box / n, float(tol), order=order)
    return PeriodicNufft(spectral.m_max, spectral.eps).n ** 3


def available_memory(device="cpu"):
    """(host bytes available, GPU bytes free or None), None where unknown
    (:func:`vortexsim.backend.memory.available_memory`)."""
    from ..backend.memory import available_memory as query  # noqa: PLC0415
    return query(device)


def _what(est):
    return (f"{est.n_elements:,} elements" + (f" (+{est.n_sources - est.n_elements:,} "
                                              "images)" if est.n_sources > est.n_elements
                                              else "")
            + f", {est.n_tracers:,} tracers")


def check_resources(config, device="auto", max_memory=None, sharing=(1, 1)):
    """Refuse the run of ``config`` on ``device`` when its memory estimate exceeds what is
    available; returns the :class:`Estimate` (None when the size cannot be told).

    Parameters
    ----------
    config : dict, ``{"case": name, key: value, ...}`` (the resolved parameters of
        ``vortexsim run``, or a snapshot's stored config on restart)
    device : "cpu" | "gpu" | "auto" | Device
    max_memory : int [bytes] or None, the bound to use instead of the machine's
        available memory (``--max-memory``), on each of host and GPU
    sharing : (int, int[, int]), the MPI ranks on this machine and on this rank's GPU,
        and of the run (:meth:`vortexsim.cli.ranks.Ranks.sharing`): the machine and the
        GPU hold that many ranks' memory; a rank holds the whole state's, except in a run
        split by slabs (:func:`split_fraction` of the work memory on its device: the
        GPU's, or the host's on the CPU, where the same fraction is assumed)

    Raises :class:`ResourceError` naming the estimate and the bound.
    """
    est = estimate_memory(config, device)
    if est is None:
        return None
    on_host, on_gpu = sharing[:2]
    ranks = sharing[2] if len(sharing) > 2 else 1
    est = per_rank(est, split_fraction(config, ranks))
    est = dataclasses.replace(est, host_bytes=est.host_bytes * on_host,
                              device_bytes=est.device_bytes * on_gpu)
    host, gpu = (max_memory, max_memory) if max_memory is not None else \
        available_memory(est.device)
    split = split_fraction(config, max(ranks, 2)) < 1            # it would be split
    fix = ("lower n_phi, layers or tracers_per_ring" +
           (f", or start fewer MPI ranks per machine ({on_host}) or per GPU ({on_gpu}): "
            "each holds the whole state" if max(sharing[:2]) > 1 and not split else "") +
           (f", or spread the run over more MPI ranks (mpiexec -n P; {ranks} now): each "
            f"holds its slab of the state: {SPLIT_REPLICATED:.0%} of the one-rank "
            "memory and 1/P of the rest" if split
            else "") +
           (", or pass --max-memory SIZE if the estimate is wrong" if max_memory is None
            else ""))

    def bound(where, n):
        return (f"--max-memory is {format_bytes(n)}" if max_memory is not None
                else f"{where} has {format_bytes(n)} available")

    if est.device == "gpu" and gpu is not None and est.device_bytes > gpu:
        raise ResourceError(
            f"the run needs about {format_bytes(est.device_bytes)} of GPU memory "
            f"({_what(est)}) but {bound('the GPU', gpu)}; {fix}.")
    if host is not None and est.host_bytes > host:
        raise ResourceError(
            f"the run needs about {format_bytes(est.host_bytes)} of memory ({_what(est)} "
            f"on the {est.device.upper()}) but {bound('this machine', host)}; {fix}.")
    return est


def _auto_intervals(dt, duration, snapshot_interval, diagnostics_interval):
    """The intervals of ``vortexsim.output.writers.output_intervals``, refused where the
    automatic diagnostics interval would be derived from more than :data:`HARD_LIMIT`
    steps (the caller has bounded duration / dt)."""
    from ..output.writers import output_intervals  # noqa: PLC0415
    snap, _ = output_intervals(dt, duration, snapshot_interval, diagnostics_interval or dt)
    if not diagnostics_interval and not snap / (10 * dt) <= HARD_LIMIT:
        raise ResourceError(f"snapshot_interval {snap:.6g} is about {snap / dt:.3g} steps of "
                            f"dt {dt:.3g}, too many to derive the automatic "
                            "diagnostics_interval from; lower it or set diagnostics_interval.")
    return output_intervals(dt, duration, snap, diagnostics_interval)


def check_schedule(*, dt, duration, steps=None, snapshot_interval=None,
                   diagnostics_interval=None, force=False):
    """The number of steps, snapshots and diagnostics rows of a run, refused beyond the
    bounds.

    Parameters
    ----------
    dt : float [T], the step (the largest one with adaptive steps, so the count is a
        lower bound there)
    duration : float [T], t_end − t0 (with ``steps``: only for the automatic intervals,
        which come from it, as in ``vortexsim.output.writers.output_intervals``)
    steps : int or None, the run's step count (``--steps``); its time span is then at most
        steps × dt
    snapshot_interval, diagnostics_interval : float [T] or None (automatic)
    force : bool, lift :data:`MAX_STEPS`, :data:`MAX_SNAPSHOTS` and
        :data:`MAX_DIAGNOSTICS_ROWS` (not :data:`HARD_LIMIT`)

    Returns
    -------
    dict with ``steps``, ``snapshots``, ``rows`` (floats: estimates, at least the
    scheduled outputs plus the first and the last) and the ``snapshot_interval`` and
    ``diagnostics_interval`` used.

    Every step ends on the next output or stop time, so outputs more frequent than dt
    add steps: the estimate is span / min(dt, intervals).  Raises
    :class:`ResourceError` with the numbers.
    """
    if steps is not None and steps > HARD_LIMIT:
        raise ResourceError(f"--steps {steps} is more than a run can count ({HARD_LIMIT}); "
                            f"give at most {MAX_STEPS} (or up to {HARD_LIMIT} with --force).")
    auto = snapshot_interval is None or diagnostics_interval is None
    if (steps is None or auto) and not duration / dt <= HARD_LIMIT:
        why = "" if steps is None else "; the automatic output intervals are derived from it"
        raise ResourceError(f"t_end {duration:.6g} is about {duration / dt:.3g} steps of dt "
                            f"{dt:.3g}, more than a run can count ({HARD_LIMIT:.3g}){why}; "
                            "lower t_end or raise dt.")
    snap, diag = _auto_intervals(dt, duration, snapshot_interval, diagnostics_interval)
    span = duration if steps is None else steps * dt
    n_snap = span / snap + 2
    n_rows = span / diag + 2
    n_steps = float(steps) if steps is not None else span / min(dt, snap, diag)
    if steps is not None:          # at most one output of each kind per step
        n_snap, n_rows = min(n_snap, steps + 2), min(n_rows, steps + 2)
    shortest = min(dt, snap, diag)
    step_fix = ("raise the output intervals (every step ends on the next output time)"
                if shortest < dt else "lower --steps" if steps is not None else
                "lower t_end or raise dt (or use --steps)")
    counts = [("take", "steps", n_steps, MAX_STEPS, step_fix),
              ("write", "snapshot files", n_snap, MAX_SNAPSHOTS, "raise snapshot_interval"),
              ("write", "diagnostics rows", n_rows, MAX_DIAGNOSTICS_ROWS,
               "raise diagnostics_interval")]
    numbers = (f"{'steps ' + str(steps) if steps is not None else 't_end ' + format(span, '.6g')}"
               f", dt {dt:.3g}, snapshot_interval {snap:.3g}, diagnostics_interval {diag:.3g}")
    for verb, what, n, bound, fix in counts:
        if not n <= HARD_LIMIT:
            raise ResourceError(f"the run would {verb} about {n:.3g} {what} ({numbers}), more "
                                f"than a run can count ({HARD_LIMIT:.3g}); {fix}.")
    if not force:
        for verb, what, n, bound, fix in counts:
            if n > bound:
                raise ResourceError(
                    f"the run would {verb} about {n:.3g} {what} ({numbers}), more than "
                    f"{bound}; {fix}, or pass --force to run it anyway.")
    return {"steps": n_steps, "snapshots": n_snap, "rows": n_rows,
            "snapshot_interval": snap, "diagnostics_interval": diag}


def _existing_parent(path):
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def check_disk(run_dir, n_elements, n_tracers, snapshots, rows, force=False, freed=0,
               scratch=0):
    """Refuse a run whose files would not fit on the disk of ``run_dir``.

    Snapshots: (7 × elements + 3 × tracers) float64 values and about 64 kB of
    attributes each; ``diagnostics.nc``: about 1 kB per row (and its temporary copy when
    rewritten); ``scratch`` [bytes]: temporary files the run keeps there besides
    (:func:`spill_bytes`).  ``freed`` [bytes] is what the run removes first
    (``--overwrite``).  Returns the estimate [bytes]; raises :class:`ResourceError` (not
    with ``force``)."""
    per_snapshot = 8 * (7 * n_elements + 3 * n_tracers) + _SNAPSHOT_FIXED
    need = snapshots * per_snapshot + 2 * rows * _ROW_BYTES + scratch
    try:
        free = shutil.disk_usage(_existing_parent(run_dir)).free + freed
    except OSError:
        return need
    if need > free and not force:
        spilled = (f", {format_bytes(scratch)} of temporary files for the whole state of "
                   "its snapshots" if scratch else "")
        raise ResourceError(
            f"the run would write about {format_bytes(need)} ({snapshots:.3g} snapshots of "
            f"{format_bytes(per_snapshot)}, {rows:.3g} diagnostics rows{spilled}) but the "
            f"disk of {run_dir} has {format_bytes(free)} free; raise snapshot_interval, "
            "free space, or pass --force to run it anyway.")
    return need


def spill_bytes(config, ranks, reserved=0):
    """Disk bytes that rank 0 of a run of ``config`` on ``ranks`` ranks puts into
    temporary files of its run directory at most: where the ranks split the state by
    slabs (:func:`split_fraction`) and the whole state (72 B a node) goes to files
    (:func:`vortexsim.backend.spill.should_spill`: above a quarter of the memory
    available once the ranks of the machine hold their ``reserved`` bytes), per node the
    nodes' x, σ, V and labels (48 B, kept) and the strengths (24 B) of the state being
    put together and of each snapshot that the output thread may still hold
    (:meth:`vortexsim.model.slab_partition.SlabPartition.assemble_on_root`); else 0."""
    if split_fraction(config, ranks) >= 1:
        return 0
    from ..backend.spill import should_spill  # noqa: PLC0415
    from ..simulation.output_thread import MAX_PENDING  # noqa: PLC0415
    n = _count(config.get("n"))
    spills = should_spill(72 * n ** 3, reserved)
    return (48 + 24 * (1 + MAX_PENDING)) * n ** 3 if spills else 0


#: seconds per evaluation on the CPU (2 cores of the CI machine, float64, tol 1e-6), per
#: method: (per element with its ∇u, per tracer); the direct sum by its pair rate.
#: Measured with the leapfrog rings at the GPU preset's resolution (16256 elements with
#: 8192 and 65536 tracers: 9.0 and 18.9 s for the case's build and first evaluation) and
#: the periodic cases' CPU defaults (the mesh solve: 24³ RK2 at 65 ms a step; the
#: spectral sum: 28 s for 100 steps)
CPU_SECONDS = {"fmm": (4.7e-4, 1.7e-4), "mesh": (2.5e-6, 2.5e-6),
               "spectral": (1.0e-5, 1.0e-5)}
#: wall time [s] of ``vortexsim run NAME`` with the shipped case file (the CPU default,
#: the whole command) on 2 CPU cores of a quiet machine, per case; ``vortexsim cases``
#: prints it (the case files' header comments quote the same numbers)
CASE_CPU_SECONDS = {"single_ring": 18, "leapfrog": 60, "collision": 40,
                    "oblique_collision": 47, "ring_ground": 23, "taylor_green": 9,
                    "isotropic_turbulence": 8}
#: direct sum on the CPU: pairs per second (``vortexsim.fmm.plan.COST_RATES``' near field)
CPU_DIRECT_PAIRS = 2.0e7
#: evaluations of the velocity per step, per integrator
EVALUATIONS = {"euler": 1, "rk2": 2, "rk4": 4}
#: an evaluation estimated to take longer than this [s] is announced before it starts
ANNOUNCE_SECONDS = 5.0


def cpu_seconds(config, est):
    """Estimated seconds of one velocity evaluation of the run of ``config`` on the CPU
    (:class:`Estimate` ``est``): a rough figure (a factor of 2) for the user, from
    :data:`CPU_SECONDS` and :data:`CPU_DIRECT_PAIRS`."""
    method = _method(config)
    if method == "direct":
        return est.n_sources * (est.n_elements + est.n_tracers) / CPU_DIRECT_PAIRS
    per_element, per_tracer = CPU_SECONDS.get(method, CPU_SECONDS["fmm"])
    return per_element * est.n_elements + per_tracer * est.n_tracers


def announce_cpu_cost(config, est, preset=None, steps=None, log=None):
    """Log, before a CPU run builds its case, what its first evaluation will take when
    that is longer than :data:`ANNOUNCE_SECONDS`, and warn when a GPU preset runs on the
    CPU, with the expected time per step and for the run (``steps`` steps; default the
    case's t_end / dt).  Returns the estimated seconds of one evaluation (None on a GPU)."""
    import logging  # noqa: PLC0415
    log = log or logging.getLogger("vortexsim.cli")
    if est is None or est.device != "cpu":
        return None
    evaluation = cpu_seconds(config, est)
    per_step = evaluation * EVALUATIONS.get(str(config.get("integrator", "rk4")), 4)
    if steps is None:
        dt, t_end = config.get("dt"), config.get("t_end")
        steps = math.ceil(t_end / dt) if isinstance(dt, (int, float)) and dt > 0 and \
            isinstance(t_end, (int, float)) else None
    more = " (more: dt adapts below it)" if config.get("adaptive") else ""
    whole = (f", about {_duration(per_step * steps)} for its {steps:,} steps{more}"
             if steps else "")
    if preset and "gpu" in str(preset).lower():
        log.warning("the preset %r is sized for a GPU and runs on the CPU here: about %s a "
                    "step%s (--device gpu on a machine with one, or a smaller --set)",
                    preset, _duration(per_step), whole)
    if evaluation > ANNOUNCE_SECONDS:
        log.info("building the case: %s (the memory check's sizes); its first velocity "
                 "evaluation on the CPU takes up to about %s", _what(est),
                 _duration(evaluation))
    return evaluation


def _duration(seconds):
    """A rough duration in words: 40 s, 12 min, 3.2 h, 4.1 days."""
    if seconds < 90:
        return f"{seconds:.2g} s"
    if seconds < 5400:
        return f"{seconds / 60:.2g} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.2g} h"
    return f"{seconds / 86400:.2g} days"
