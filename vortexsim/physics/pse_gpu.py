r"""Particle strength exchange on the GPU: the operator of :func:`vortexsim.physics.pse.pse_rate`
on CuPy arrays.

The cell list is the CPU's (:func:`vortexsim.physics.pse_common.cell_grid`, written with
``xp`` operations: cells of edge ≥ the reach, elements sorted by cell id with CuPy's
stable sort, only occupied cells kept).  Each occupied cell gets its 27 neighbour cells
(``searchsorted`` over the occupied cell ids; in the box, wrapped, with the image shift
of the minimum image) and one CUDA block of ``cuda/pse.cu``: its threads are the cell's
elements, the neighbours' elements pass through shared memory, and each element sums
its exchanges in a fixed order into its own output.  No atomics: the result is the same
bitwise from run to run.  Every pair is evaluated from both sides (twice the CPU's
pair count; the CPU evaluates the forward half of the stencil once and scatters), so
Σ_p dα_p/dt vanishes to the round-off of the sums, not by construction; it agrees with
the NumPy sum to ~1e-14 of the largest rate.

Memory O(N + K): the sorted copies (N, 7), the neighbour table (K, 27) and its shifts
(K, 27, 3) of the K occupied cells.  Time O(27 (w/h)³ N) pair tests (w ∈ [reach,
2 reach) the cell edge).  The kernel is compiled on first use
(:func:`vortexsim.kernels.modules.get_function`).
"""
from __future__ import annotations

import numpy as np

from ..backend import array_namespace, import_cupy, to_host
from ..kernels.modules import get_function
from ..state import check_element_shapes
from .pse_common import (PSE_TOL, cell_grid, cell_neighbors, check_pse_order,
                         check_volume_flags, checked_arguments, pse_constant)

__all__ = ["pse_rate_gpu", "neighbor_table"]

#: threads per block (one block per occupied cell)
BLOCK = 128

# the 27 stencil offsets in lexicographic order
_STENCIL = np.array([(i, j, k) for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)],
                    dtype=np.int64)


def pse_rate_gpu(x, alpha, volume, epsilon, nu, *, box=None, tol=PSE_TOL, order=2):
    """:func:`vortexsim.physics.pse.pse_rate` on the current CUDA device: ``x`` (N, 3)
    [L], ``alpha`` (N, 3) [L³/T] CuPy arrays, ``volume`` a CuPy (N,) array or a scalar
    [L³]; returns a CuPy (N, 3) float64 array [L³/T²] in the order of ``x``.  The same
    arguments, checks and errors as there (one device-to-host transfer for the checks);
    TypeError for a mix of NumPy and CuPy arrays."""
    cp = import_cupy()
    order = check_pse_order(order)
    x, alpha, volume, epsilon, nu, reach, box = checked_arguments(
        _check_device_elements(cp, x, alpha, volume), epsilon, nu, box, tol, order, cp)
    n = x.shape[0]
    out = cp.zeros((n, 3), dtype=cp.float64)
    if nu == 0.0:
        return out
    grid = cell_grid(x, reach, box, cp)
    nbr, shift = neighbor_table(grid, cp)
    av = cp.ascontiguousarray(cp.concatenate([alpha[grid.order], volume[grid.order][:, None]],
                                             axis=1))
    acc = cp.empty((n, 3), dtype=cp.float64)
    k = int(grid.start.shape[0]) - 1
    fn = get_function("pse.cu", f"pse_exchange<{order},{BLOCK}>")
    fn((k,), (BLOCK,), (cp.ascontiguousarray(grid.xs), av, grid.start, nbr, shift,
                        np.float64(reach * reach), np.float64(-0.25 / (epsilon * epsilon)),
                        acc))
    out[grid.order] = acc * pse_constant(epsilon, nu)
    return out


def neighbor_table(grid, xp):
    """The 27 neighbour cells of each occupied cell of ``grid``
    (:func:`~vortexsim.physics.pse_common.cell_neighbors` with the whole stencil)."""
    return cell_neighbors(grid, _STENCIL, xp)


def _check_device_elements(cp, x, alpha, volume):
    """x (N, 3), alpha (N, 3) and volume (N,) as float64 CuPy arrays, with the checks of
    :func:`vortexsim.physics.pse_common.check_host_elements` (one transfer for the flags)."""
    try:
        xp = array_namespace(x, alpha, volume)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"PSE on the GPU needs x, alpha and volume on the device (CuPy "
                        f"arrays; volume may be a scalar): {exc}") from None
    if xp is not cp:                                       # pragma: no cover - guarded
        raise TypeError("PSE on the GPU needs CuPy arrays.")
    arrays = {}
    for name, a in (("x", x), ("alpha", alpha)):
        if a.dtype.kind not in "fiu":
            raise TypeError(f"{name} has dtype {a.dtype}; expected a real numeric array.")
        arrays[name] = a.astype(cp.float64, copy=False)
    x, alpha = arrays["x"], arrays["alpha"]
    n = check_element_shapes(x, alpha)
    if isinstance(volume, (int, float)) and not isinstance(volume, bool):
        volume = cp.full(n, float(volume))
    elif getattr(volume, "dtype", None) is None or volume.dtype.kind not in "fiu":
        raise TypeError(f"volume must be a number or a numeric (N,) array, got {volume!r}.")
    volume = volume.astype(cp.float64, copy=False)
    if volume.ndim == 0:
        volume = cp.full(n, volume)
    if volume.shape != (n,):
        raise ValueError(f"volume has shape {volume.shape}; expected a scalar or ({n},).")
    flags = to_host(cp.stack([cp.isfinite(x).all(), cp.isfinite(alpha).all(),
                              cp.isnan(volume).any(),
                              (cp.isfinite(volume) & (volume > 0)).all()]))
    if not flags[0]:
        raise ValueError("x contains NaN or inf; all inputs must be finite.")
    if not flags[1]:
        raise ValueError("alpha contains NaN or inf; all inputs must be finite.")
    check_volume_flags(flags[2], flags[3])
    return x, alpha, volume
