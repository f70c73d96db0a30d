"""What the PSE sums of both devices share: the exchange kernels of order 2 and 4, their
cut and reach, the rate's constant, the argument checks and the cell list.

:mod:`vortexsim.physics.pse` (the NumPy sum, the specification, and the entry
:func:`~vortexsim.physics.pse.pse_rate`) and :mod:`vortexsim.physics.pse_gpu` (the CUDA
gather) both build on these; the module docstring of ``pse`` derives the kernels and
the cut.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..kernels.morton import column_range
from ..geometry.periodic import wrap
from ..state import host_element_arrays

__all__ = ["pse_kernel", "pse_cutoff", "pse_reach", "pse_constant", "check_pse_order",
           "checked_arguments", "cell_grid", "CellGrid", "cell_neighbors",
           "check_positive_length", "check_viscosity", "check_pse_box", "check_host_elements",
           "check_volume_flags", "PSE_TOL", "PSE_ORDERS", "PERIODIC_MARGIN", "PSE_NORM"]


#: the orders of the exchange kernels (2: the Gaussian; 4: (7/2 − ρ²/4) × the Gaussian)
PSE_ORDERS = (2, 4)


#: default relative tolerance of the cut (lost fraction of the kernel's second moment)
PSE_TOL = 1e-6


#: the periodic box must be at least 2·reach·(1 + PERIODIC_MARGIN): rounding in the
#: distances then cannot put two images of one pair within the reach
PERIODIC_MARGIN = 1e-6


#: normalisation of η, (4π)^{−3/2}
PSE_NORM = (4.0 * math.pi) ** -1.5


#: cells per axis of the free-space cell list (3 × 21 bits fit the int64 cell ids)
_MAX_CELLS_PER_AXIS = 1 << 21


def pse_kernel(rho, xp=np, order=2):
    r"""The exchange kernel η(ρ) (ρ = |r|/ε, dimensionless): (4π)^{−3/2} e^{−ρ²/4} at
    order 2, (4π)^{−3/2} (7/2 − ρ²/4) e^{−ρ²/4} at order 4.

    ∫ z_i z_j η d³z = 2 δ_ij (the second-moment condition of the operator in
    :func:`pse_rate`); ∫ η d³z = 1 (order 2) or 2 (order 4, whose fourth moments vanish);
    η_ε(r) = ε⁻³ η(|r|/ε) [1/L³].
    """
    order = check_pse_order(order)
    rho = xp.asarray(rho, dtype=xp.float64)
    q = 0.25 * rho * rho
    g = PSE_NORM * xp.exp(-q)
    return g if order == 2 else (3.5 - q) * g


def _tail_fraction(x, order):
    """∫_{|z|>ρ} |z|² |η| / ∫ |z|² |η| at x = ρ²/4 (order 4: for ρ ≥ √14 only)."""
    from scipy.special import gammaincc  # noqa: PLC0415 - kept out of the command's start
    if order == 2:
        return gammaincc(2.5, x)
    t0 = 15.0 * gammaincc(3.5, 3.5) - 21.0 * gammaincc(2.5, 3.5)
    return (15.0 * gammaincc(3.5, x) - 21.0 * gammaincc(2.5, x)) / (6.0 + 2.0 * t0)


@functools.lru_cache(maxsize=64)
def pse_cutoff(tol: float = PSE_TOL, order: int = 2) -> float:
    """ρ_c(tol): the smallest ρ at which ∫_{|z|>ρ} |z|² |η| / ∫ |z|² |η| ≤ tol (module
    docstring, "Cut").

    ``tol`` in [1e-15, 1e-2]; ρ_c = 8.47 (order 2) and 9.07 (order 4) at 1e-6."""
    tol = _check_tol(tol)
    order = check_pse_order(order)
    # the fraction decreases: order 2 from 0.97 at ρ = 1, order 4 from 0.19 at √14
    # (where η changes sign); both below 1e-40 at 20
    lo, hi = (1.0, 20.0) if order == 2 else (math.sqrt(14.0), 20.0)
    for _ in range(60):                    # bisection to ~1e-17 of the bracket
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _tail_fraction(0.25 * mid * mid, order) > tol else (lo, mid)
    return hi


def pse_reach(epsilon: float, tol: float = PSE_TOL, order: int = 2) -> float:
    """Distance [L] beyond which :func:`pse_rate` drops pairs: ρ_c(tol, order) · ε."""
    return pse_cutoff(tol, order) * check_positive_length("epsilon", epsilon)


def pse_constant(epsilon, nu):
    """ν ε⁻⁵ (4π)^{−3/2} [1/(L³ T)]: the factor of the sums Σ_q (V_p α_q − V_q α_p) w_pq,
    w = e^{−ρ²/4} (order 2) or (7/2 − ρ²/4) e^{−ρ²/4} (order 4)."""
    return nu / (epsilon * epsilon) * PSE_NORM / epsilon ** 3


class CellGrid:
    """Elements sorted by cell: ``order`` (N,), the occupied cells' integer coordinates
    ``cells`` (K, 3) and CSR ``start`` (K + 1,), the cell edge ``width`` (3,), the grid's
    ``lo`` (3,) and ``shape`` (3,), the box (None: free space), sorted positions ``xs``."""

    __slots__ = ("order", "cells", "ids", "start", "width", "lo", "shape", "box", "xs")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


def cell_grid(x, reach, box, xp):
    """Sort the elements into cells of edge ≥ ``reach`` (only occupied cells are kept:
    memory O(N) whatever the extent)."""
    if box is None:
        lo, hi = column_range(x, xp)
        extent = hi - lo
        cells = extent / reach
        if float(cells.max()) >= _MAX_CELLS_PER_AXIS:
            raise ValueError(
                f"the elements span {float(extent.max()):.6g} [L], more than "
                f"{_MAX_CELLS_PER_AXIS} PSE reaches ({reach:.6g}) along one axis; the cell "
                "list holds at most 2^21 cells per axis. Split the elements into groups "
                "farther apart than the reach, or use a larger epsilon.")
        shape = xp.maximum(xp.floor(cells), 1).astype(xp.int64)
        # edges in [reach, 2 reach): positions relative to a cell's centre stay of the
        # order of the reach (one cell: its centre within the reach of every element)
        width = xp.where(shape > 1, extent / shape, reach)
    else:
        lo = xp.zeros(3)
        shape = xp.full(3, int(box // reach), dtype=xp.int64)     # ≥ 2 (checked box)
        width = box / shape
    ijk = xp.minimum(xp.floor((x - lo) / width).astype(xp.int64), shape - 1)
    ijk = xp.maximum(ijk, 0)
    ids = ijk[:, 0] + shape[0] * (ijk[:, 1] + shape[1] * ijk[:, 2])
    order = xp.argsort(ids, kind="stable")
    ids = ids[order]
    first = xp.concatenate([xp.ones(1, dtype=bool), ids[1:] != ids[:-1]])
    heads = xp.flatnonzero(first)
    start = xp.concatenate([heads, xp.asarray([ids.shape[0]])]).astype(xp.int64)
    return CellGrid(order=order, cells=ijk[order][heads], ids=ids[heads], start=start,
                 width=width, lo=lo, shape=shape, box=box, xs=x[order])


def check_pse_order(order):
    """``order`` as an int, 2 or 4 (a ValueError otherwise)."""
    if isinstance(order, bool) or order not in PSE_ORDERS:
        raise ValueError(f"the PSE order (pse_order) must be one of {PSE_ORDERS} (the "
                         f"order in epsilon of the exchange kernel's error), got {order!r}.")
    return int(order)


def checked_arguments(elements, epsilon, nu, box, tol, order, xp):
    """The checked arguments of :func:`pse_rate` on ``xp``: (x wrapped into the box,
    alpha, volume, epsilon, nu, the kernel's reach [L], box), from ``elements`` = the
    device's checked (x, alpha, volume)."""
    x, alpha, volume = elements
    epsilon = check_positive_length("epsilon", epsilon)
    nu = check_viscosity(nu)
    reach = pse_reach(epsilon, tol, order)
    if box is not None:
        box = check_pse_box(box, reach, epsilon, tol, order)
        x = wrap(x, box)
    return x, alpha, volume, epsilon, nu, reach, box


def _check_tol(tol):
    try:
        tol = float(tol)
    except (TypeError, ValueError):
        raise TypeError(f"tol must be a number in [1e-15, 1e-2], got {tol!r}.") from None
    if not 1e-15 <= tol <= 1e-2:
        raise ValueError(f"tol must be in [1e-15, 1e-2] (the fraction of the exchange "
                         f"kernel's second moment the cut may lose), got {tol!r}.")
    return tol


def _scalar(name, v, what):
    if isinstance(v, bool) or np.ndim(v) != 0:
        raise TypeError(f"{name} must be a scalar number ({what}), got {v!r}.")
    try:
        v = float(v)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a scalar number ({what}), got {v!r}.") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite ({what}), got {v!r}.")
    return v


def check_positive_length(name, v):
    """``v`` as a float; TypeError unless a finite scalar, ValueError unless > 0."""
    v = _scalar(name, v, "a length [L] > 0")
    if v <= 0:
        raise ValueError(f"{name} must be > 0 [L], got {v!r}.")
    return v


def check_viscosity(nu):
    """``nu`` [L²/T] as a float; TypeError unless a finite scalar, ValueError if < 0."""
    nu = _scalar("nu", nu, "kinematic viscosity [L²/T] >= 0")
    if nu < 0:
        raise ValueError(f"viscosity nu must be >= 0 [L²/T], got {nu!r} (diffusion "
                         "backwards in time is ill-posed).")
    return nu


def check_pse_box(box, reach, epsilon, tol, order=2):
    """The periodic box edge L as a float; ValueError unless L ≥ 2 reach (1 +
    :data:`PERIODIC_MARGIN`), so that each pair has one image within the reach."""
    box = check_positive_length("box", box)
    need = 2.0 * reach * (1.0 + PERIODIC_MARGIN)
    if box < need:
        other = (f", or the order-2 kernel (pse_order = 2, reach {pse_cutoff(tol, 2):.4g} "
                 "epsilon)" if order == 4 else "")
        raise ValueError(
            f"periodic box L = {box!r} is too small for the PSE reach {reach:.6g} "
            f"(= {reach / epsilon:.4g} epsilon at tol = {tol:g}, order {order}): need "
            f"L >= 2 reach = {need:.6g} so that each pair has one image within it. Use a "
            f"smaller epsilon (at most {box / need * epsilon:.6g}; in a simulation epsilon "
            f"= sigma/sqrt(2): a finer lattice), a larger tol{other}.")
    return box


def check_host_elements(x, alpha, volume):
    """(x, alpha, volume) as checked host arrays (:func:`vortexsim.state.host_element_arrays`),
    volumes known, finite and > 0."""
    x, alpha, per = host_element_arrays(x, alpha, volume=volume)
    volume = per["volume"]
    check_volume_flags(np.isnan(volume).any(), (np.isfinite(volume) & (volume > 0)).all(),
                       f"; got min {volume.min()!r}, max {volume.max()!r}")
    return x, alpha, volume


def check_volume_flags(has_nan, valid, detail=""):
    """Raise ValueError for volumes with NaN (not known) or not all finite and > 0
    (``valid`` False); ``detail``: text appended to the latter message."""
    if has_nan:
        raise ValueError("volume contains NaN (element volumes not known): PSE weighs "
                         "the exchange with the volumes; build the elements with "
                         "volume=... (h³ on a lattice).")
    if not valid:
        raise ValueError(f"volume must be finite and > 0 for every element{detail}.")


def cell_neighbors(grid, stencil, xp):
    """The cells at ``stencil`` offsets (S, 3) from each occupied cell of ``grid``:
    ``nbr`` (K, S) int64 indices into the occupied cells (−1: none, outside the grid or
    empty) and ``shift`` (K, S, 3) float64 [L], the image shift to add to their
    positions (the box's multiples; 0 in free space), both C-contiguous ``xp`` arrays."""
    cells, shape = grid.cells, xp.asarray(grid.shape)
    c = cells[:, None, :] + xp.asarray(stencil)[None, :, :]          # (K, S, 3) unwrapped
    if grid.box is None:
        inside = ((c >= 0) & (c < shape)).all(axis=2)
        wrapped = xp.clip(c, 0, shape - 1)
        shift = xp.zeros(c.shape, dtype=xp.float64)
    else:
        inside = xp.ones(c.shape[:2], dtype=bool)
        wrapped = xp.mod(c, shape)
        shift = xp.floor_divide(c, shape).astype(xp.float64) * grid.box
    ids = wrapped[..., 0] + shape[0] * (wrapped[..., 1] + shape[1] * wrapped[..., 2])
    pos = xp.minimum(xp.searchsorted(grid.ids, ids.ravel()).reshape(ids.shape),
                     grid.ids.shape[0] - 1)
    found = inside & (grid.ids[pos] == ids)
    nbr = xp.where(found, pos, -1).astype(xp.int64)
    return xp.ascontiguousarray(nbr), xp.ascontiguousarray(shift)
