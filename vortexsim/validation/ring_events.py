"""Ring measurements shared by the ring studies (``benchmarks/validation/validate_rings.py``,
:mod:`vortexsim.validation.resolution_study`): a cheap per-ring record of a running simulation and the event
times read off its rows.

Recording.  :func:`ring_rows` gives each ring group's impulse centre (3,) [L] and impulse
radius [L], the same quantities as the ``ring_centre`` and ``ring_radius`` of
``Simulation.diagnostics()`` (``vortexsim.diagnostics.RowSums``; ``physics.md``,
"Vortex rings"), without the all-pairs energy and
enstrophy of a full diagnostics row: a few reductions on the device and one transfer.
:class:`RingRecorder` is a callback that appends one such row at the times of its
schedule, and the final state.

Events (host NumPy, rows ``t`` (K,) increasing, values ``y`` (K,)):

    crossing_times(t, g)      every t where g changes sign, linear between rows
                              (leapfrog passes: g = Z_front − Z_rear)
    first_crossing(t, y, c)   the first t where y reaches c, linear between rows
    extremum(t, y, "min")     the smallest (largest) value; inside the record refined by the
                              parabola through the row and its two neighbours
    value_range(t, y)         (min, max), both refined as in ``extremum``

Linear interpolation of a crossing is exact for a linear g and has the error
Δt²/8 · |g''/g'| otherwise; the parabola's vertex has an error O(Δt³).
"""
from __future__ import annotations

import numpy as np

from vortexsim.backend import array_namespace, to_host

__all__ = ["ring_rows", "RingRecorder", "bridge_circulation", "crossing_times",
           "first_crossing", "extremum", "value_range"]


# -- recording --------------------------------------------------------------------------
def ring_rows(sim):
    """Impulse centres (R, 3) [L] and radii (R,) [L] of the ring groups of ``sim``
    (host arrays, one transfer), as ``Simulation.diagnostics()`` defines them
    (:meth:`Simulation.row_sums`)."""
    if not any(g.is_ring for g in sim.groups):
        raise ValueError("the simulation has no ring groups; ring_rows measures the rings of "
                         "the ring cases (vortexsim.make_case).")
    sums = sim.row_sums()
    v = sums.finish(to_host(sums(sim.elements.x, sim.elements.alpha)))
    return v["ring_centre"], v["ring_radius"]


def bridge_circulation(x, alpha, sigma, plane_x=0.0):
    r"""Circulation of the bridges that two reconnecting rings form across the plane
    x = ``plane_x`` (the plane of contact of ``oblique_collision``) [L²/T], in [0, Γ].

    Rings side by side (centres at ∓x, moving along ≈ +z) meet in that plane with
    antiparallel segments along y; as they reconnect, vortex lines cross the plane in two
    bridges, at y > 0 and y < 0, with opposite ω_x (Kida, Takaoka & Hussain, JFM 230,
    1991, measure reconnection by such a circulation).  The flux of the Gaussian blobs'
    ω_x through the half-planes is exact for the blob field:

        F_± = Σ_p α_{p,x} g_σ(x_p − plane_x) Φ(±y_p/σ_p),

    g_σ the normal density and Φ the normal distribution of standard deviation σ (the
    Gaussian kernel's ζ is a normal density of σ per axis).  Returns |F_− − F_+| / 2:
    0 before the rings touch, Γ once the contact segments are gone.

    Parameters
    ----------
    x : array (N, 3) [L]; alpha : array (N, 3) [L³/T]; sigma : array (N,) or float [L]
    plane_x : float [L]

    Returns
    -------
    float (host)
    """
    xp = array_namespace(x, alpha)
    if xp is np:
        from scipy.special import erf  # noqa: PLC0415
    else:
        from cupyx.scipy.special import erf  # noqa: PLC0415
    sigma = xp.asarray(sigma, dtype=xp.float64)
    d = (x[:, 0] - plane_x).astype(xp.float64)
    density = xp.exp(-0.5 * (d / sigma) ** 2) / (np.sqrt(2 * np.pi) * sigma)
    # Φ(−y/σ) − Φ(y/σ) = −erf(y / (√2 σ))
    odd = -erf(x[:, 1].astype(xp.float64) / (np.sqrt(2.0) * sigma))
    return abs(float(to_host(xp.sum(alpha[:, 0].astype(xp.float64) * density * odd)))) / 2


class RingRecorder:
    """Callback recording the rings (:func:`ring_rows`) at the times of ``schedule`` (None:
    after every step), at its creation (the initial state) and at the end of a run.

    Attributes
    ----------
    t : list of float [T]; centres : list of (R, 3) [L]; radii : list of (R,) [L]
    on_row : optional ``f(sim)`` called after each row (progress messages)
    measures : {name: f(sim) → float}, recorded with every row into ``extra[name]``
    """

    def __init__(self, sim, schedule=None, on_row=None, measures=None):
        self.schedule, self.on_row = schedule, on_row
        self.measures = dict(measures or {})
        self.t, self.centres, self.radii = [], [], []
        self.extra = {name: [] for name in self.measures}
        self.record(sim)

    def record(self, sim):
        if self.t and sim.t <= self.t[-1]:
            return
        centres, radii = ring_rows(sim)
        self.t.append(float(sim.t))
        self.centres.append(centres)
        self.radii.append(radii)
        for name, measure in self.measures.items():
            self.extra[name].append(float(measure(sim)))
        if self.on_row is not None:
            self.on_row(sim)

    __call__ = record

    def finalize(self, sim, reason):
        """The last state of a run (done, interrupted or the last good one)."""
        self.record(sim)

    def arrays(self):
        """``t`` (K,), ``centres`` (K, R, 3), ``radii`` (K, R) as NumPy arrays."""
        return np.array(self.t), np.array(self.centres), np.array(self.radii)


# -- events -----------------------------------------------------------------------------
def _rows(t, y):
    t, y = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
    if t.ndim != 1 or t.shape != y.shape:
        raise ValueError(f"t and y must be 1-d of one length, got shapes {t.shape} and "
                         f"{y.shape}.")
    if len(t) > 1 and not np.all(np.diff(t) > 0):
        raise ValueError("t must increase strictly (one row per time).")
    return t, y


def crossing_times(t, g):
    """Every time where ``g`` changes sign, interpolated linearly between the rows (a row
    with g = 0 counts once, as a crossing at that row).  List of float [T]."""
    t, g = _rows(t, g)
    up = g >= 0
    idx = np.nonzero(up[1:] != up[:-1])[0]
    return [float(t[i] - g[i] * (t[i + 1] - t[i]) / (g[i + 1] - g[i])) for i in idx]


def first_crossing(t, y, level):
    """The first time where ``y`` reaches ``level`` (from either side), linear between the
    rows; 0-th row if it starts there; None if it never does."""
    t, y = _rows(t, y)
    if len(y) and y[0] == level:
        return float(t[0])
    times = crossing_times(t, y - level)
    return times[0] if times else None


def extremum(t, y, kind="min"):
    """The smallest (``kind="min"``) or largest (``"max"``) value of ``y``.

    Returns ``(t_ext, y_ext, interior)``: at an interior row, the vertex of the parabola
    through that row and its two neighbours (its value no worse than the row's); at the
    first or last row, that row, with ``interior`` False (the extremum may lie outside
    the record, e.g. a ring still approaching the ground at the end of the run).
    """
    if kind not in ("min", "max"):
        raise ValueError(f"kind must be 'min' or 'max', got {kind!r}.")
    t, y = _rows(t, y)
    if not len(t):
        raise ValueError("extremum of an empty record.")
    s = 1.0 if kind == "min" else -1.0
    i = int(np.argmin(s * y))
    if i == 0 or i == len(y) - 1:
        return float(t[i]), float(y[i]), False
    (t0, t1, t2), (y0, y1, y2) = t[i - 1:i + 2], y[i - 1:i + 2]
    # Newton form y = y0 + d1 (τ − t0) + c (τ − t0)(τ − t1); vertex where y' = 0
    d1, d2 = (y1 - y0) / (t1 - t0), (y2 - y1) / (t2 - t1)
    c = (d2 - d1) / (t2 - t0)
    if s * c <= 0:                      # flat or not convex toward the extremum
        return float(t1), float(y1), True
    tv = 0.5 * (t0 + t1) - d1 / (2 * c)
    yv = y0 + d1 * (tv - t0) + c * (tv - t0) * (tv - t1)
    if not (t0 <= tv <= t2) or s * yv > s * y1:
        return float(t1), float(y1), True
    return float(tv), float(yv), True


def value_range(t, y):
    """``(min, max)`` of ``y``, each refined as in :func:`extremum`."""
    return extremum(t, y, "min")[1], extremum(t, y, "max")[1]
