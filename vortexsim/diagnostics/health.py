r"""Numerical health of a vortex-particle run: four measures on every diagnostics row.

A vortex-particle discretisation is accurate while its blobs overlap along the vortex
lines, while the energy it holds follows the physics, while the time step resolves the
strain, and (for ring cases) while the vorticity stays on its rings.  Each diagnostics
row carries one measure of each (``HEALTH_COLUMNS``), and the run log warns once per
measure when it crosses its limit (``LIMITS``), with the fix:

``energy_error`` [1]
    (E − E_ref)/E(0), E_ref = E(0) − ∫₀ᵗ ν Ω₂ dt' (Ω₂ = ∫|ω|² dV the row's enstrophy,
    the integral by the trapezoidal rule over the rows; inviscid: E_ref = E(0)).  An
    inviscid flow conserves E; a viscous one loses ν Ω₂ per unit time (free space, a
    free-slip ground plane and the periodic box alike).  Limit 1 %.
``spacing_max`` [1]
    max over the elements p with |α_p| ≥ ``SIGNIFICANT`` max|α| of d_p/σ_p, d_p the
    distance to the nearest other element inside the double cone of half-angle 60°
    around α_p (along the vortex line through p).  Stretching pulls elements apart along
    the lines, which is where the blobs must overlap; across the lines the layers of a
    core come closer as it thins, so the plain nearest neighbour would not see it.  A
    ring of N_φ stations at spacing 2πR/N_φ = σ gives 1; a lattice of spacing h with
    σ = overlap·h gives 1/overlap.  Values beyond ``SPACING_CAP`` are reported as
    ``SPACING_CAP`` (the search looks no farther).  Limit 1.5 (overlap lost).
``ring_escaped`` (ring) [1]
    per ring group, the fraction of Σ|α| of its elements that lies farther than R/2
    from the ring's core circle (centre, axis and radius R of the same row's impulse
    frame): vorticity shed behind the ring, or a ring that has broken up or reconnected.
    Limit 5 %.
``step_strain`` [1]
    dt·max‖∇u‖_F of the last step (max over its stages and the elements; at t = 0 the
    first step's dt and the initial field).  Limit 0.5: M4′ remeshing and the cores'
    rotation need dt·max|∇u| ≲ 0.5–1 (``physics.md``).

The measures cost O(N) (a cell list of edge ``SPACING_CAP``·max σ for the spacing) on
the model's device, with one host transfer each.
"""
from __future__ import annotations

import itertools
import logging
import math

import numpy as np

from ..backend import array_namespace, to_host

logger = logging.getLogger(__name__)

__all__ = ["HEALTH_COLUMNS", "LIMITS", "SPACING_CAP", "SIGNIFICANT", "line_spacing",
           "ring_escaped", "energy_error", "HealthLog", "summary_lines"]

#: the diagnostics columns of this module
HEALTH_COLUMNS = ("energy_error", "spacing_max", "ring_escaped", "step_strain")
#: spacing_max values beyond this are reported as this (the search reaches no farther;
#: its cells of edge SPACING_CAP·max σ hold 8 nodes of a lattice of spacing σ, so that
#: an element has about 27 × 8 candidates)
SPACING_CAP = 2.0
#: elements below this fraction of max|α| do not count in spacing_max (a remeshed set's
#: fringe of nearly empty nodes)
SIGNIFICANT = 1e-2
#: the cone around α_p: cos² of its half-angle, 60° (with room for round-off): wide
#: enough that a lattice always has an axis neighbour inside it (the largest component
#: of a unit vector is at least 1/√3 > cos 60°), narrow enough to leave out the layers
#: of a core beside p
_CONE_COS2 = 0.25 - 1e-9
#: elements per pass of the spacing search (bounds its memory: a pass holds the block's
#: pairs, _BLOCK × 27 × the cell occupancy, ~3.5e6 on a lattice of spacing σ)
_BLOCK = 1 << 14

#: the limit of each measure, what crossing it means and what to do
LIMITS = {
    "energy_error": (0.01, "energy off its balance by {value:+.2%} at t = {t:.4g} (limit ±1%)",
                     "the discretisation has lost accuracy: enable remeshing "
                     "(remesh_every, remesh_spacing ~ sigma), raise the resolution "
                     "(n_phi, layers) or lower dt"),
    "spacing_max": (1.5, "overlap lost: elements {value:.3g} sigma apart along the vortex "
                    "lines at t = {t:.4g} (limit 1.5)",
                    "enable remeshing (remesh_every ~ 5, remesh_spacing ~ sigma) or raise "
                    "n_phi"),
    "ring_escaped": (0.05, "{value:.1%} of ring {ring!r}'s strength is more than R/2 from "
                     "its core at t = {t:.4g} (limit 5%)",
                     "vorticity has left the ring (shed, broken up or reconnected); if the "
                     "flow should not do that, raise the resolution or enable remeshing"),
    "step_strain": (0.5, "dt max|grad u| = {value:.3g} at t = {t:.4g} (limit 0.5)",
                    "lower dt, or set adaptive = true (courant <= 0.5)"),
}
#: the fixes in the periodic box, where the elements are the remeshing lattice
PERIODIC_FIXES = {
    "energy_error": "the lattice does not resolve the flow (energy goes to the grid scale "
                    "faster than viscosity removes it): raise n, or nu, or lower dt",
}


def line_spacing(x, alpha, sigma, cap=SPACING_CAP, significant=SIGNIFICANT):
    """max_p d_p/σ_p, the largest element spacing along the vortex lines (module
    docstring, ``spacing_max``).

    Parameters
    ----------
    x : array (N, 3) [L]; alpha : array (N, 3) [L³/T]; sigma : array (N,) [L]
        (NumPy or CuPy)
    cap : float, the largest value reported; significant : float, the elements with
        |α| below this fraction of max|α| are not counted

    Returns
    -------
    float (host), in (0, cap]; nan for fewer than two elements.

    A cell list of edge cap·max σ: every candidate of an element lies in its own or one
    of the 26 cells around it; one vectorised pass per block of ``_BLOCK`` elements goes
    over the element–candidate pairs of those 27 cells (O(N × occupancy) work, memory
    bounded by the block).
    """
    xp = array_namespace(x, alpha)
    n = int(x.shape[0])
    if n < 2:
        return math.nan
    x = x.astype(xp.float64)
    alpha = alpha.astype(xp.float64)
    sigma = xp.broadcast_to(xp.asarray(sigma, dtype=xp.float64), (n,))
    mag2 = xp.sum(alpha * alpha, axis=1)
    counted = xp.flatnonzero(mag2 >= significant ** 2 * xp.max(mag2))
    tangent = alpha[counted] / xp.sqrt(mag2[counted])[:, None]
    edge = cap * float(to_host(xp.max(sigma)))
    cell = xp.floor((x - xp.min(x, axis=0)) / edge).astype(xp.int64) + 1
    dims = [int(v) + 2 for v in to_host(xp.max(cell, axis=0))]
    key = (cell[:, 0] * dims[1] + cell[:, 1]) * dims[2] + cell[:, 2]
    order = xp.argsort(key, kind="stable")
    sorted_key = key[order]
    best = xp.concatenate([_nearest_along(xp, x, tangent, counted[a:a + _BLOCK],
                                          key, order, sorted_key, dims, a)
                           for a in range(0, int(counted.shape[0]), _BLOCK)])
    ratio = xp.sqrt(best) / sigma[counted]
    return float(min(cap, float(to_host(xp.max(xp.minimum(ratio, cap))))))


def _nearest_along(xp, x, tangent, block, key, order, sorted_key, dims, start):
    """Squared distance from each element of ``block`` (indices) to its nearest other
    element inside the cone around its tangent (``tangent[start:]`` row by row), among
    the elements of its cell and the 26 around it (inf: none).

    One pass over all the block's element–candidate pairs, the 27 cells of each element
    in turn: pair k belongs to the (element, cell) segment ``seg[k]`` (element-major, so
    the elements' pairs are contiguous) and takes that cell's candidate number
    k − (the segment's first pair).  One host transfer (the pair count)."""
    t = tangent[start:start + block.shape[0]]
    shifts = xp.asarray([(a * dims[1] + b) * dims[2] + c
                         for a, b, c in itertools.product((-1, 0, 1), repeat=3)],
                        dtype=key.dtype)
    target = (key[block][:, None] + shifts[None, :]).ravel()
    lo = xp.searchsorted(sorted_key, target, side="left")
    count = xp.searchsorted(sorted_key, target, side="right") - lo
    ends = xp.cumsum(count)
    best = xp.full(block.shape[0], xp.inf)
    total = int(to_host(ends[-1])) if ends.shape[0] else 0
    if total == 0:
        return best
    pair = xp.arange(total, dtype=ends.dtype)
    seg = xp.searchsorted(ends, pair, side="right")
    owner = seg // shifts.shape[0]
    j = order[lo[seg] + pair - (ends[seg] - count[seg])]
    p = block[owner]
    d = x[j] - x[p]
    dist2 = xp.sum(d * d, axis=1)
    along = xp.sum(d * t[owner], axis=1)
    ok = (j != p) & (along * along >= _CONE_COS2 * dist2) & (dist2 > 0)
    _segment_min(xp, best, owner, xp.where(ok, dist2, xp.inf))
    return best


def _segment_min(xp, out, owner, values):
    """out[i] = min(out[i], min of values[k] over k with owner[k] = i), in place.

    ``out`` and ``values`` are float64 >= 0 or inf (squared distances).  A minimum does not
    depend on the order it is taken in, so the scatter gives the same bits on every run
    (``numpy.minimum.reduceat`` over the segments of the sorted ``owner``;
    ``cupyx.scatter_min`` of the int64 bit patterns on the GPU)."""
    if xp is np:
        if owner.size:
            starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            seg = owner[starts]
            out[seg] = np.minimum(out[seg], np.minimum.reduceat(values, starts))
    else:
        # on the bit patterns: for floats >= 0 (and inf) their int64 order is the numeric
        # order, and an integer atomic minimum is exact (cupyx's float scatter_min rounded
        # the distances, 2.5e-9 relative on an H100)
        import cupyx  # noqa: PLC0415
        cupyx.scatter_min(out.view(xp.int64), owner,
                          xp.ascontiguousarray(values, dtype=xp.float64).view(xp.int64))


def ring_escaped(x, alpha, ranges, centres, axes, radii):
    """Per ring, the fraction of Σ|α| of its elements farther than R/2 from its core
    circle (module docstring, ``ring_escaped``).

    Parameters
    ----------
    x : array (N, 3) [L]; alpha : array (N, 3) [L³/T]
    ranges : list of (start, stop), each ring's elements
    centres : (R, 3) [L], axes : (R, 3) unit, radii : (R,) [L] (host), the rings' frames

    Returns
    -------
    host array (R,) in [0, 1] (nan for a ring without strength or without a radius)
    """
    xp = array_namespace(x, alpha)
    parts = []
    for (a, b), c, n, r in zip(ranges, centres, axes, radii):
        xr, ar = x[a:b].astype(xp.float64), alpha[a:b].astype(xp.float64)
        d = xr - xp.asarray(c, dtype=xp.float64)
        along = d @ xp.asarray(n, dtype=xp.float64)
        radial = xp.sqrt(xp.maximum(xp.sum(d * d, axis=1) - along * along, 0.0))
        off = xp.sqrt((radial - float(r)) ** 2 + along * along)
        mag = xp.sqrt(xp.sum(ar * ar, axis=1))
        far = xp.sum(xp.where(off > 0.5 * float(r), mag, 0.0))
        parts.append(xp.stack([far, xp.sum(mag)]))
    if not parts:
        return np.zeros(0)
    v = to_host(xp.stack(parts))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = v[:, 0] / v[:, 1]
    out[~(v[:, 1] > 0) | ~(np.asarray(radii, dtype=float) > 0)] = math.nan
    return out


def energy_error(t, energy, enstrophy, nu):
    """(E − E_ref)/E(0) of each row (module docstring, ``energy_error``).

    Parameters
    ----------
    t, energy, enstrophy : (R,) host arrays [T], [L⁵/T²], [L³/T²], the rows so far
    nu : float [L²/T]

    Returns
    -------
    array (R,); nan where E(0) is 0 or a needed enstrophy is not finite.
    """
    t, e = np.asarray(t, dtype=float), np.asarray(energy, dtype=float)
    if not e.size or e[0] == 0:
        return np.full(e.shape, math.nan)
    lost = np.zeros_like(e)
    if nu > 0:
        rate = nu * np.asarray(enstrophy, dtype=float)
        lost[1:] = np.cumsum(0.5 * (rate[1:] + rate[:-1]) * np.diff(t))
    return (e - (e[0] - lost)) / e[0]


class HealthLog:
    """The history-dependent measure (``energy_error``) of a run's rows, and the run
    log's warnings, each once per measure (and ring) and process.

    :meth:`update` takes the rows so far (the last one new, with the row's own measures
    ``spacing_max``, ``ring_escaped``, ``step_strain`` already in it), adds
    ``energy_error`` to the new row and warns where a limit is crossed.  The rows of a
    resumed run are its earlier rows, so a restart continues the integral exactly.
    """

    def __init__(self, nu, periodic=False):
        self.nu = float(nu)
        self.fixes = PERIODIC_FIXES if periodic else {}
        self.warned = set()
        self.worst = {}

    def update(self, rows):
        """Add ``energy_error`` to ``rows[-1]`` (from all ``rows``) and warn."""
        row = rows[-1]
        if "energy" in row:
            err = energy_error([r["t"] for r in rows], [r["energy"] for r in rows],
                               [r.get("enstrophy", math.nan) for r in rows], self.nu)
            row["energy_error"] = float(err[-1])
        for name in ("energy_error", "spacing_max", "step_strain"):
            if name in row:
                self._check(name, abs(float(row[name])) if name == "energy_error"
                            else float(row[name]), row["t"], shown=float(row[name]))
        for ring, value in zip(row.get("ring_names", ()), row.get("ring_escaped", ())):
            self._check("ring_escaped", float(value), row["t"], ring=ring)
        return row

    def _check(self, name, value, t, ring=None, shown=None):
        if not math.isfinite(value):
            return
        key = (name, ring)
        self.worst[key] = max(self.worst.get(key, -math.inf), value)
        limit, what, fix = LIMITS[name]
        fix = self.fixes.get(name, fix)
        if value > limit and key not in self.warned:
            self.warned.add(key)
            logger.warning("numerical health: %s; %s.",
                           what.format(value=value if shown is None else shown, t=t,
                                       ring=ring), fix)


def summary_lines(t, columns, ring_names=()):
    """Text lines for ``info`` and ``analyze``: per measure its worst value over a run's
    rows, when, against its limit.

    Parameters
    ----------
    t : (R,) [T], the rows' times
    columns : dict name → (R,) or (R, rings) array of the :data:`HEALTH_COLUMNS` present
    ring_names : names of the ring columns of ``ring_escaped``

    Returns
    -------
    list of str (empty when no measure is present)
    """
    t = np.asarray(t, dtype=float)
    lines = []
    for name in HEALTH_COLUMNS:
        if name not in columns or not t.size:
            continue
        values = np.asarray(columns[name], dtype=float)
        limit = LIMITS[name][0]
        series = [(None, values)] if values.ndim == 1 else \
            [(ring, values[:, i]) for i, ring in enumerate(ring_names)]
        for ring, v in series:
            size = np.abs(v) if name == "energy_error" else v
            if not np.isfinite(size).any():
                continue
            i = int(np.nanargmax(size))
            shown = (f"{v[i]:+.3%}" if name == "energy_error" else
                     f"{v[i]:.2%}" if name == "ring_escaped" else f"{v[i]:.3g}")
            bound = f"±{limit:.0%}" if name == "energy_error" else \
                f"{limit:.0%}" if name == "ring_escaped" else f"{limit:g}"
            verdict = "over the limit" if size[i] > limit else "ok"
            label = name if ring is None else f"{name} ({ring})"
            lines.append(f"{label:<28} worst {shown:>9} at t = {t[i]:<8.4g} limit {bound:<5} "
                         f"{verdict}")
    return ["numerical health (worst over the rows):", *("  " + s for s in lines)] \
        if lines else []
