r"""Simulation state: vortex elements, passive tracers and labelled element groups.

``physics.md`` ("State"):

* vortex elements p = 1..N: position ``x`` (N, 3) [L], vector strength ``alpha`` = ω_p V_p
  (N, 3) [L³/T], core radius ``sigma`` (N,) [L], volume ``volume`` (N,) [L³] (what particle
  strength exchange weighs with; NaN where the builder did not give it) and a group label
  ``group`` (N,) int (the index of the element's :class:`ElementGroup`, −1 for none);
* passive tracers t = 1..M: position ``x`` (M, 3) [L]; they move with the flow and induce
  nothing.

The arrays live on one device (NumPy or CuPy), chosen once when the state is built
(:func:`make_elements`, :func:`make_tracers`); afterwards nothing here moves data
between host and device.  Element groups (:class:`ElementGroup`) label index ranges, e.g.
the elements of one vortex ring, for per-ring diagnostics.
"""
from __future__ import annotations

import dataclasses
import logging

import numpy as np

from .backend import Device, array_namespace, host_copy, is_cupy_array, to_host

logger = logging.getLogger(__name__)

__all__ = ["Elements", "Tracers", "ElementGroup", "make_elements", "make_tracers",
           "group_labels", "check_group_ranges", "host_element_arrays", "check_element_shapes",
           "uniform_core_radius"]


@dataclasses.dataclass
class Elements:
    """Vortex elements on one device.

    Attributes
    ----------
    x : array (N, 3) [L], positions
    alpha : array (N, 3) [L³/T], vector strengths (vorticity × volume)
    sigma : array (N,) [L], core radii, > 0
    volume : array (N,) [L³] or None, element volumes (NaN: not known)
    group : array (N,) int64 or None, group label (index into the simulation's groups,
        −1: none)

    The time step replaces ``x``, ``alpha`` and ``sigma`` and carries ``volume`` and
    ``group`` over; a new particle set (remeshing) replaces them all at once
    (:meth:`vortexsim.Simulation.replace_elements`).
    """

    x: object
    alpha: object
    sigma: object
    volume: object = None
    group: object = None

    def __len__(self):
        return int(self.x.shape[0])

    def volume_unknown(self):
        """Whether any element's volume is not known (None, or NaN entries)."""
        if self.volume is None:
            return len(self) > 0
        xp = array_namespace(self.volume)
        return bool(to_host(xp.isnan(self.volume).any()))

    def to_host(self):
        """NumPy copies ``{"x", "alpha", "sigma", "volume", "group"}`` (float64 arrays stay
        bitwise equal): the checkpointed state; a frozen array (a whole state put
        together for a snapshot, :func:`vortexsim.backend.spill.frozen`) is handed on
        without a copy, read-only.  ``volume`` (N,) is float64 [L³] (NaN: not
        known), ``group`` (N,) int64 (−1: none); an element set without them (None) gives
        NaN and −1."""
        n = len(self)
        volume = np.full(n, np.nan) if self.volume is None else host_copy(self.volume)
        group = np.full(n, -1, dtype=np.int64) if self.group is None else host_copy(self.group)
        return {"x": host_copy(self.x), "alpha": host_copy(self.alpha),
                "sigma": host_copy(self.sigma),
                "volume": volume.astype(np.float64, copy=False),
                "group": group.astype(np.int64, copy=False)}


@dataclasses.dataclass
class Tracers:
    """Passive tracers on one device: ``x`` (M, 3) [L] (M may be 0)."""

    x: object

    def __len__(self):
        return int(self.x.shape[0])

    def to_host(self):
        """NumPy copy ``{"x"}``."""
        return {"x": to_host(self.x).copy()}


@dataclasses.dataclass(frozen=True)
class ElementGroup:
    """A labelled index range ``[start, stop)`` of the elements (e.g. one vortex ring).

    Attributes
    ----------
    name : str
    start, stop : int, the elements ``start .. stop-1``
    circulation : float [L²/T], Γ of a ring (None for groups that are not rings)
    axis : tuple (3,), the ring's initial axis n̂ (its direction of travel for Γ > 0)
    """

    name: str
    start: int
    stop: int
    circulation: float | None = None
    axis: tuple | None = None

    def __post_init__(self):
        if not 0 <= self.start < self.stop:
            raise ValueError(f"group {self.name!r}: need 0 <= start < stop, got "
                             f"[{self.start}, {self.stop}).")

    @property
    def is_ring(self) -> bool:
        return self.circulation is not None and self.axis is not None

    def as_dict(self):
        """Plain-dict form (JSON-able) for configs and checkpoints."""
        return {"name": self.name, "start": self.start, "stop": self.stop,
                "circulation": self.circulation,
                "axis": None if self.axis is None else [float(a) for a in self.axis]}

    @classmethod
    def from_dict(cls, d):
        axis = d.get("axis")
        return cls(str(d["name"]), int(d["start"]), int(d["stop"]),
                   None if d.get("circulation") is None else float(d["circulation"]),
                   None if axis is None else tuple(float(a) for a in axis))


def _host_float64(name, a, shape_hint):
    try:
        a = np.asarray(to_host(a))
    except Exception as exc:  # noqa: BLE001
        raise TypeError(f"{name} must be an array of shape {shape_hint}; got "
                        f"{type(a).__name__}.") from exc
    if a.dtype.kind not in "fiu":
        raise TypeError(f"{name} has dtype {a.dtype}; expected real numbers of shape "
                        f"{shape_hint}.")
    return np.asarray(a, dtype=np.float64, order="C")


def host_element_arrays(x, alpha, **per_element):
    """Host float64 arrays of N elements: positions x (N, 3) [L] and strengths alpha
    (N, 3) [L³/T] (finite, N ≥ 1), and for each keyword a (N,) array from a scalar or an
    (N,) value (e.g. ``sigma=``, ``volume=``; their values are the caller's to check).
    Returns (x, alpha, {name: array}); ``ValueError``/``TypeError`` for wrong shapes or
    dtypes and non-finite x, alpha."""
    x = _host_float64("x", x, "(N, 3)")
    n = check_element_shapes(x)
    alpha = _host_float64("alpha", alpha, f"({n}, 3)")
    check_element_shapes(x, alpha)
    out = {}
    for name, value in per_element.items():
        a = _host_float64(name, value, f"scalar or ({n},)")
        if a.ndim == 0:
            a = np.full(n, float(a))
        if a.shape != (n,):
            raise ValueError(f"{name} has shape {a.shape}; expected a scalar or ({n},).")
        out[name] = a
    for name, a in (("x", x), ("alpha", alpha)):
        if not np.isfinite(a).all():
            raise ValueError(f"{name} contains NaN or inf; all inputs must be finite.")
    return x, alpha, out


def check_element_shapes(x, alpha=None):
    """N, for positions ``x`` (N, 3), N ≥ 1, and (when given) strengths ``alpha`` (N, 3)
    of any array namespace; ValueError saying which shape is wrong otherwise."""
    if x.ndim != 2 or x.shape[1] != 3 or x.shape[0] == 0:
        raise ValueError(f"x has shape {x.shape}; expected (N, 3) element positions [L] with "
                         "N >= 1.")
    n = x.shape[0]
    if alpha is not None and alpha.shape != (n, 3):
        raise ValueError(f"alpha has shape {alpha.shape}; expected ({n}, 3) to match x. "
                         "Pass vector strengths (vorticity × volume), not vorticity.")
    return n


def uniform_core_radius(lo, hi, what):
    """The one core radius σ = ``lo`` [L] of elements whose cores span [lo, hi] (host
    floats); a ValueError naming ``what`` needs it when they differ beyond round-off."""
    if hi > lo * (1 + 1e-12):
        raise ValueError(f"{what} needs one core radius for all elements (got {lo:g} to "
                         f"{hi:g}).")
    return lo


def make_elements(x, alpha, sigma, device: Device, dtype="float64", volume=None,
                  group=None) -> Elements:
    """Validate element arrays (host or device) once and place them on ``device``.

    Parameters
    ----------
    x : (N, 3) [L]; alpha : (N, 3) [L³/T]; sigma : float or (N,) [L], > 0
    device : :class:`vortexsim.Device`
    dtype : the floating dtype of the state (float64 unless the config says otherwise)
    volume : float or (N,) [L³], > 0, optional (default NaN: not known)
    group : (N,) integers ≥ −1, optional (default −1: no group)

    Raises ``ValueError``/``TypeError`` for wrong shapes, non-finite values or σ ≤ 0.
    Arrays that are on the GPU ``device`` already (a case built there) are checked
    there and kept (:func:`_device_elements`).
    """
    if device.kind == "gpu" and is_cupy_array(x) and is_cupy_array(alpha):
        return _device_elements(x, alpha, sigma, device.xp, dtype, volume, group)
    x, alpha, per = host_element_arrays(x, alpha, sigma=sigma)
    n, sigma = x.shape[0], per["sigma"]
    if not np.isfinite(sigma).all():
        raise ValueError("sigma contains NaN or inf; all inputs must be finite.")
    if not (sigma > 0).all():
        raise ValueError(f"sigma must be > 0 for every element; got min(sigma) = {sigma.min()}.")
    if volume is None:
        volume = np.nan
    if np.ndim(volume) == 0:
        volume = np.full(n, float(volume))
    volume = _host_float64("volume", volume, f"scalar or ({n},)")
    if volume.shape != (n,) or not (np.isnan(volume) | (volume > 0)).all():
        raise ValueError(f"volume must be a scalar or ({n},) of numbers > 0 (NaN: not "
                         f"known), got shape {volume.shape}.")
    group = np.full(n, -1, dtype=np.int64) if group is None else np.asarray(to_host(group))
    if group.shape != (n,) or group.dtype.kind not in "iu" or (group.size and group.min() < -1):
        raise ValueError(f"group must be ({n},) integers >= -1 (the index of each element's "
                         f"group, -1 for none), got shape {group.shape}, dtype {group.dtype}.")
    xp = device.xp
    return Elements(xp.asarray(x, dtype=dtype), xp.asarray(alpha, dtype=dtype),
                    xp.asarray(sigma, dtype=dtype), xp.asarray(volume, dtype=dtype),
                    xp.asarray(group, dtype=np.int64))


def _device_elements(x, alpha, sigma, xp, dtype, volume, group):
    """:func:`make_elements` of device arrays ``x``, ``alpha`` (and σ, volumes, labels:
    scalars or arrays): the same checks and errors, made on the device with one
    transfer of their verdicts, and the arrays kept where their dtype is the state's."""
    n = check_element_shapes(x, alpha)
    per = {}
    for name, value in (("sigma", sigma), ("volume", np.nan if volume is None else volume)):
        a = xp.asarray(value)
        if a.dtype.kind not in "fiu":
            raise TypeError(f"{name} has dtype {a.dtype}; expected real numbers.")
        per[name] = xp.full(n, float(a)) if a.ndim == 0 else a
        if per[name].shape != (n,):
            raise ValueError(f"{name} has shape {a.shape}; expected a scalar or ({n},).")
    for name, a in (("x", x), ("alpha", alpha)):
        if a.dtype.kind not in "fiu":
            raise TypeError(f"{name} has dtype {a.dtype}; expected real numbers.")
    sigma, volume = per["sigma"], per["volume"]
    group = xp.full(n, -1, dtype=np.int64) if group is None else xp.asarray(group)
    if group.shape != (n,) or group.dtype.kind not in "iu":
        raise ValueError(f"group must be ({n},) integers >= -1, got shape {group.shape}, "
                         f"dtype {group.dtype}.")
    verdicts = to_host(xp.stack([
        xp.isfinite(x).all(), xp.isfinite(alpha).all(), xp.isfinite(sigma).all(),
        (sigma > 0).all(), (xp.isnan(volume) | (volume > 0)).all(), group.min() >= -1]))
    for ok, message in zip(verdicts, (
            "x contains NaN or inf; all inputs must be finite.",
            "alpha contains NaN or inf; all inputs must be finite.",
            "sigma contains NaN or inf; all inputs must be finite.",
            "sigma must be > 0 for every element.",
            f"volume must be a scalar or ({n},) of numbers > 0 (NaN: not known).",
            "group labels must be >= -1 (the index of each element's group, -1 for none).")):
        if not ok:
            raise ValueError(message)
    # C-ordered arrays of the state's dtype, as the host path makes (no copy where they
    # are already: a builder's arrays become the state)
    return Elements(*(xp.ascontiguousarray(a.astype(dtype, copy=False))
                      for a in (x, alpha, sigma, volume)),
                    xp.ascontiguousarray(group.astype(np.int64, copy=False)))


def group_labels(groups, n):
    """Host (n,) int64 labels of the index ranges of ``groups`` (−1 outside every group)."""
    labels = np.full(n, -1, dtype=np.int64)
    for i, g in enumerate(groups):
        labels[g.start:g.stop] = i
    return labels


def check_group_ranges(groups, labels):
    """ValueError (one line) unless host ``labels`` (N,) integers and ``groups`` (a
    sequence of :class:`ElementGroup`) describe the same element groups: every label in
    −1 .. len(groups)−1, and each group i holds exactly the elements labelled i, its range
    ``[start, stop)`` (so that each group is contiguous and none is empty)."""
    labels = np.asarray(labels)
    n, count = labels.shape[0], len(groups)
    if labels.size and (labels.min() < -1 or labels.max() >= count):
        bad = labels[(labels < -1) | (labels >= count)]
        raise ValueError(f"group labels hold {bad.size} value(s) outside -1 .. {count - 1} "
                         f"(first: {int(bad[0])}) for {count} group(s)")
    for i, g in enumerate(groups):
        if g.stop > n:
            raise ValueError(f"group {g.name!r} has the range [{g.start}, {g.stop}) beyond "
                             f"the {n} elements")
        where = np.flatnonzero(labels == i)
        if where.size != g.stop - g.start or (where.size and (where[0] != g.start
                                                              or where[-1] != g.stop - 1)):
            first = f"{int(where[0])} .. {int(where[-1])}" if where.size else "none"
            raise ValueError(f"group {g.name!r} has the range [{g.start}, {g.stop}) but "
                             f"{where.size} element(s) labelled {i} (indices {first})")


def make_tracers(x, device: Device, dtype="float64") -> Tracers:
    """Validate tracer positions (M, 3) [L] (``None`` or M = 0 for none) and place them."""
    if x is None:
        x = np.zeros((0, 3))
    x = _host_float64("tracers", x, "(M, 3)")
    if x.ndim != 2 or x.shape[1] != 3:
        raise ValueError(f"tracer positions have shape {x.shape}; expected (M, 3).")
    if not np.isfinite(x).all():
        raise ValueError("tracer positions contain NaN or inf; all inputs must be finite.")
    return Tracers(device.xp.asarray(x, dtype=dtype))
