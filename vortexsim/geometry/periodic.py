r"""The periodic box [0, L)³: wrapping positions, the net-vorticity condition, the lattice.

* :func:`wrap`: any real position to its image in [0, L) (what every periodic sum does
  with its points first);
* :func:`check_periodic_sources`: a periodic vorticity field has zero net circulation in
  the box, Σ_p α_p = 0 (to :data:`NET_VORTICITY_TOL` relative to Σ|α|), or its velocity
  is not periodic;
* :func:`periodic_nodes`: the lattice x_j = j h, h = L/n, of the box (remeshing, the
  lattice sums and the lattice diffusion): n = L/h an integer ≥ :data:`MIN_PERIODIC_NODES`.
"""
from __future__ import annotations

import math

import numpy as np

from ..backend import array_namespace, to_host
from ..kernels.morton import column_sums

__all__ = ["lattice_node_positions", "are_lattice_nodes", "wrap", "check_periodic_sources", "NET_VORTICITY_TOL", "periodic_nodes",
           "MAX_PERIODIC_NODES",
           "MIN_PERIODIC_NODES", "positive_finite"]

#: |Σ α| / Σ |α| above which the box's vorticity is not periodic (Σ α must vanish to
#: round-off; in float32 1000 ε of it)
NET_VORTICITY_TOL = 1e-10
#: fewest nodes per side of a periodic lattice: the 4 nodes per axis of an M4′ stencil
#: distinct
MIN_PERIODIC_NODES = 4
#: relative tolerance on L/h being an integer
NODE_RATIO_TOLERANCE = 1e-9
#: the most nodes per side of a periodic lattice: 10⁴ (10¹² nodes, beyond any machine's
#: memory; the run's memory estimate refuses smaller lattices that do not fit)
MAX_PERIODIC_NODES = 10 ** 4


def wrap(x, box):
    """Positions x [L] (any shape) mapped into [0, box) (every real position is
    accepted; NumPy or CuPy).  x − box·floor(x/box) can round to ``box`` itself or to
    −tiny just below a multiple of the box: those go to 0, their periodic twin."""
    xp = array_namespace(x)
    w = x - box * xp.floor(x / box)
    return xp.where((w >= box) | (w < 0), 0.0, w)


def check_periodic_sources(alpha, what="the elements", communicator=None):
    """Raise ValueError unless Σα vanishes to round-off (:data:`NET_VORTICITY_TOL`
    relative to Σ|α|): a periodic vorticity field has zero net circulation in the box.
    NumPy or CuPy (the sums on the device, four numbers to the host).  ``communicator``:
    ``alpha`` is this rank's part of the elements, the sums are those of every rank's
    (collective)."""
    xp = array_namespace(alpha)
    a = alpha if hasattr(alpha, "dtype") else np.asarray(alpha)
    tol = max(NET_VORTICITY_TOL, 1e3 * float(np.finfo(a.dtype).eps)) \
        if np.issubdtype(a.dtype, np.floating) else NET_VORTICITY_TOL
    a = xp.asarray(a, dtype=xp.float64).reshape(-1, 3)
    if a.shape[0] == 0 and communicator is None:
        return
    # the column sums and Σ|α| in one transfer
    sums = np.zeros(4) if a.shape[0] == 0 else np.asarray(to_host(
        xp.concatenate([column_sums(a), xp.abs(a).sum().reshape(1)])))
    if communicator is not None:
        sums = np.asarray(communicator.allreduce_sum(sums))
    net, scale = float(np.abs(sums[:3]).max()), float(sums[3])
    if scale > 0 and net > tol * scale:
        raise ValueError(
            f"the total vorticity of {what} is not zero (|Σα| = {net:.3g}, "
            f"{net / scale:.2g} of Σ|α|): in a periodic box Σα must vanish, or the "
            "velocity is not periodic. Remove the net strength (e.g. subtract its mean "
            "from every element) or use free space.")


def positive_finite(name, value):
    """``value`` as a float; TypeError unless a number, ValueError unless finite and > 0."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, got {value!r}.") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be finite and > 0, got {value!r}.")
    return value


def periodic_nodes(box_length, h):
    """Nodes per side n = L/h of a periodic box; ValueError unless an integer ≥ 4.

    L/h is accepted within a relative 1e-9 of an integer (h given as L/n in floating
    point); the lattice then uses h = L/n exactly.
    """
    box_length = positive_finite("box_length", box_length)
    h = positive_finite("h", h)
    ratio = box_length / h
    if ratio > MAX_PERIODIC_NODES + 0.5:
        raise ValueError(
            f"a periodic lattice of spacing h = {h!r} in the box L = {box_length!r} would have "
            f"L/h = {ratio:.6g} nodes per side, more than {MAX_PERIODIC_NODES} (its cube is "
            f"beyond any machine's memory); use h >= L/{MAX_PERIODIC_NODES} or a smaller box.")
    n = round(ratio)
    if n < 1 or abs(ratio - n) > NODE_RATIO_TOLERANCE * n:
        raise ValueError(
            f"the periodic box length L = {box_length!r} is not a whole number of lattice "
            f"spacings h = {h!r} (L/h = {ratio!r}); choose h = L/n for an integer n >= "
            f"{MIN_PERIODIC_NODES}.")
    if n < MIN_PERIODIC_NODES:
        raise ValueError(
            f"a periodic remeshing lattice needs at least {MIN_PERIODIC_NODES} nodes per "
            f"side, got L/h = {n} (L = {box_length!r}, h = {h!r}): the M4′ stencil spans 4 "
            "nodes per axis and would wrap onto itself in a narrower box. Use h <= "
            f"L/{MIN_PERIODIC_NODES}.")
    return n


def lattice_node_positions(r0, r1, n, h, dtype, xp):
    """x (r1 − r0, 3) [L] of the periodic lattice's nodes of rows r0 … r1 − 1 in remesh
    order (node (i, j, k) in row (i n + j) n + k at (i, j, k) h, computed as
    :func:`vortexsim.geometry.remesh.remesh` places them), of ``dtype`` in ``xp``."""
    dtype = np.dtype(dtype)
    row = xp.arange(r0, r1, dtype=xp.int64)
    index = xp.stack([row // (n * n), (row // n) % n, row % n], axis=1)
    del row
    return index.astype(dtype) * dtype.type(h)


def are_lattice_nodes(x, n, box, row0=0, rtol=1e-9):
    """Whether the positions ``x`` (m, 3) [L] are the nodes of rows row0 … row0 + m − 1
    of the periodic n³ lattice of edge ``box`` in remesh order, within ``rtol`` h: on
    the points' device, one column at a time, one host transfer."""
    xp, h = array_namespace(x), box / n
    row = xp.arange(row0, row0 + x.shape[0], dtype=xp.int64)
    worst = xp.zeros((), dtype=xp.float64)
    for c, stride in enumerate((n * n, n, 1)):
        node = ((row // stride) % n).astype(xp.float64) * h
        worst = xp.maximum(worst, xp.abs(x[:, c] - node).max())
    return bool(to_host(worst) <= rtol * h)
