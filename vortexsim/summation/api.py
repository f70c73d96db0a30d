r"""Public entry point for the velocity and velocity gradient induced by vortex elements.

    u, grad_u = vortexsim.induced_velocity(x, alpha, sigma, targets=None, *,
                                           kernel="gaussian", method="direct",
                                           gradient=True, precision="float64",
                                           device="auto")

See :func:`induced_velocity`.
"""
from __future__ import annotations

import logging

import numpy as np

from ..backend import (PRECISIONS, array_namespace, check_precision, is_cupy_array,
                       resolve_device, to_host)
from ..fmm.evaluator import FMM
from ..fmm.plan import check_tol
from ..geometry.periodic import check_periodic_sources
from ..kernels.cutoff import GAUSSIAN_ORDERS, check_general_kernel, get_kernel
from ..kernels.direct import direct_sum_cuda, direct_sum_numpy
from ..state import uniform_core_radius
from .auto import choose_method
from .spectral import check_spectral, spectral_velocity

logger = logging.getLogger(__name__)

__all__ = ["induced_velocity", "METHODS", "CALL_METHODS", "PRECISIONS"]

METHODS = ("direct", "fmm", "auto")
#: induced_velocity's methods: METHODS and the periodic box's spectral sum
CALL_METHODS = ("direct", "fmm", "spectral", "auto")


def _periodic(kern, method, x, alpha, sig, targets, tgt, gradient, dev, tol, box,
              precision):
    """u, ∇u (this precision) in the periodic box ``box`` by the spectral sum or the
    periodic FMM, after their checks (induced_velocity's ``box``)."""
    if box is None:
        raise ValueError("method='spectral' sums a periodic box: give its edge, box=L.")
    if method not in ("spectral", "fmm", "auto"):
        raise ValueError(f"a periodic box (box={box!r}) is summed by method='spectral', "
                         f"'fmm' (or 'auto'); method={method!r} has no periodic version.")
    if method == "auto":
        uniform = sig.size == 0 or bool(sig.min() == sig.max())
        method = choose_method(periodic=True, kernel=kern.name, uniform_sigma=uniform)
    if method == "fmm":
        fmm = FMM(kern, tol=1e-6 if tol is None else tol, precision=precision, device=dev,
                  tree="uniform")
        return fmm.evaluate(x, alpha, sig, None if targets is None else tgt,
                            gradient=bool(gradient), box=box)
    check_spectral(kern.name, dev.is_gpu)
    s = to_host(sig).astype(np.float64)
    sigma = uniform_core_radius(float(s.min()), float(s.max()), "the spectral sum") \
        if s.size else 1.0
    dtype = x.dtype
    check_periodic_sources(alpha)                       # at this precision's round-off
    u, g = spectral_velocity(x.astype(np.float64), alpha.astype(np.float64),
                             sigma, float(box),
                             None if targets is None else tgt.astype(np.float64),
                             gradient=bool(gradient), tol=1e-6 if tol is None else tol,
                             check=False, order=GAUSSIAN_ORDERS[kern.name])
    return u.astype(dtype), (None if g is None else g.astype(dtype))


def _check_choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}.")


def _as_real_array(name, a, xp, dtype, shape_hint):
    """Convert to a floating array of ``dtype`` on ``xp``; raise on bad dtypes."""
    if not (is_cupy_array(a) or isinstance(a, np.ndarray)):
        try:
            a = np.asarray(a)
        except Exception as exc:  # noqa: BLE001
            raise TypeError(f"{name} must be an array of shape {shape_hint}; got {type(a).__name__}.") from exc
    kind = a.dtype.kind
    if kind not in "fiu":
        raise TypeError(
            f"{name} has dtype {a.dtype}; expected real floating-point numbers of shape "
            f"{shape_hint}. Convert it with np.asarray({name}, dtype=float).")
    return xp.ascontiguousarray(xp.asarray(a, dtype=dtype))


def _check_finite(name, a, xp):
    ok = xp.isfinite(a)
    if not bool(ok.all()):
        bad = int(to_host(xp.argwhere(~ok.reshape(ok.shape[0], -1).all(axis=1))[0, 0]))
        raise ValueError(
            f"{name} contains NaN or inf (first at row {bad}); all inputs must be finite. "
            "A non-finite state usually means the time step was too large for the core size.")


def _check_vectors(name, a, n=None, count="N"):
    if a.ndim != 2 or a.shape[1] != 3 or (n is not None and a.shape[0] != n):
        want = f"({n}, 3)" if n is not None else f"({count}, 3)"
        raise ValueError(f"{name} has shape {tuple(a.shape)}; expected {want}.")


def induced_velocity(x, alpha, sigma, targets=None, *, kernel="gaussian", method="direct",
                     gradient=True, precision="float64", device="auto", tol=None, box=None):
    r"""Velocity and velocity gradient induced by regularized vortex elements.

    .. math::

        u(y)        = \frac{1}{4\pi}\sum_p q(\rho)\,\frac{\alpha_p\times r}{r^3},\qquad
        \partial_b u_a = \frac{1}{4\pi}\sum_p \Big[\frac{q}{r^3}\varepsilon_{acb}\alpha_{p,c}
                        - \frac{f}{r^5} r_b (\alpha_p\times r)_a\Big]

    with r = y − x_p, ρ = r/σ_p and the cutoff kernel's q, f (``physics.md``).

    Parameters
    ----------
    x : array (N, 3) [L]
        Element positions.
    alpha : array (N, 3) [L³/T]
        Vector strengths α_p = ω_p V_p (vorticity × volume, not vorticity).
    sigma : float or array (N,) [L]
        Core radii, > 0.
    targets : array (M, 3) [L] or None
        Evaluation points.  ``None`` evaluates at the elements themselves and
        excludes each element's own contribution (self pairs).
    kernel : {"gaussian", "algebraic", "winckelmans", "polynomial", "singular"}
    method : {"direct", "fmm", "spectral", "auto"}
        ``"direct"``: all pairs, exact to round-off (memory O(N + M)).
        ``"fmm"``: fast multipole method to relative accuracy ``tol`` (u; ∇u to
        10·tol) against the regularized direct sum
        (:class:`vortexsim.fmm.evaluator.FMM`; one evaluator per call — keep an
        ``FMM`` object for repeated calls).
        ``"spectral"``: the periodic box's Fourier series (needs ``box``; Gaussian
        kernel, one σ; :mod:`vortexsim.summation.spectral`), to ``tol``.
        ``"auto"``: the FMM above N·M = 2e7 pairs on the CPU (4e9 on the GPU)
        where it meets ``tol`` (down to 1e-9 on the CPU, 1e-6 on the GPU), else the
        direct sum; with ``box``, the spectral sum for Gaussian blobs of one σ, else
        the periodic FMM.
    gradient : bool
        Also return grad_u.
    precision : {"float64", "float32"}
        Arithmetic precision; outputs have this dtype.
    device : {"auto", "cpu", "gpu"}
        Where to compute.  ``"auto"`` uses the GPU for CuPy inputs or when one
        is usable, else the CPU; ``"gpu"`` without CuPy or a GPU raises.
    tol : float, optional
        Requested relative accuracy of ``method="fmm"`` and ``"spectral"`` (default 1e-6).
    box : float, optional
        The edge L [L] of a periodic box [0, L)³: the velocity of all periodic images,
        with zero box mean (``physics.md``); Σα must vanish; positions anywhere (wrapped).
        ``method="spectral"`` (Gaussian, one σ; CPU: FINUFFT, GPU: own NUFFT),
        ``"fmm"`` (the periodic FMM, CPU and GPU; kernels gaussian, polynomial,
        singular; docs/periodic.md) or ``"auto"``.

    Returns
    -------
    u : array (M, 3) [L/T]
    grad_u : array (M, 3, 3) [1/T] with grad_u[i, a, b] = ∂u_a/∂x_b, or None
        when ``gradient=False``.  NumPy inputs give NumPy outputs, CuPy inputs
        CuPy outputs, whatever device computed them.

    Raises
    ------
    ValueError, TypeError, RuntimeError
        For wrong shapes or dtypes, non-finite inputs, σ ≤ 0, unknown options,
        or ``device="gpu"`` without a usable GPU.
    """
    kern = get_kernel(kernel)
    _check_choice("method", method, CALL_METHODS)
    if not (box is not None and method in ("spectral", "auto")):
        check_general_kernel(kern, f"method={method!r}" + ("" if box is not None else
                                                           " in free space"))
    check_precision(precision)
    if not isinstance(gradient, (bool, np.bool_)):
        raise TypeError(f"gradient must be True or False, got {gradient!r}.")
    if tol is not None:
        check_tol(tol)
    in_xp = array_namespace(x, alpha, sigma if not np.isscalar(sigma) else None, targets)
    inputs_on_gpu = in_xp is not np
    if device == "auto" and inputs_on_gpu:
        dev = resolve_device("gpu")
    else:
        dev = resolve_device(device)
    xp = dev.xp
    dtype = np.dtype(precision)

    x = _as_real_array("x", x, xp, dtype, "(N, 3)")
    _check_vectors("x", x)
    n = x.shape[0]
    alpha = _as_real_array("alpha", alpha, xp, dtype, f"({n}, 3)")
    _check_vectors("alpha", alpha, n)
    if np.isscalar(sigma) or getattr(sigma, "ndim", None) == 0:
        sig = _as_real_array("sigma", sigma, xp, dtype, "scalar or (N,)")
        sig = xp.full((n,), sig, dtype=dtype)
    else:
        sig = _as_real_array("sigma", sigma, xp, dtype, f"scalar or ({n},)")
        if sig.shape != (n,):
            raise ValueError(f"sigma has shape {tuple(sig.shape)}; expected a scalar or ({n},).")
    if targets is None:
        tgt, exclude_self = x, True
    else:
        tgt = _as_real_array("targets", targets, xp, dtype, "(M, 3)")
        _check_vectors("targets", tgt, count="M")
        exclude_self = False
    for name, arr in (("x", x), ("alpha", alpha), ("sigma", sig), ("targets", tgt)):
        if arr.size:
            _check_finite(name, arr, xp)
    if sig.size and not bool((sig > 0).all()):
        raise ValueError("sigma must be > 0 for every element (core radius in length units); "
                         f"got min(sigma) = {float(sig.min())}.")

    if method == "auto" and box is None:
        n_targets = n if targets is None else tgt.shape[0]
        method = choose_method(n, n_targets, tol=1e-6 if tol is None else tol,
                               gpu=dev.is_gpu)
    if box is not None or method == "spectral":
        u, grad_u = _periodic(kern, method, x, alpha, sig, targets, tgt, gradient, dev, tol,
                              box, precision)
    elif method == "fmm":
        fmm = FMM(kern, tol=1e-6 if tol is None else tol, precision=precision, device=dev)
        u, grad_u = fmm.evaluate(x, alpha, sig, None if targets is None else tgt,
                                 gradient=bool(gradient))
    elif dev.is_gpu:
        u, grad_u = direct_sum_cuda(kern, x, alpha, sig, tgt, gradient=bool(gradient),
                                    exclude_self=exclude_self)
    else:
        u, grad_u = direct_sum_numpy(kern, x, alpha, sig, tgt, gradient=bool(gradient),
                                     exclude_self=exclude_self)
    if not inputs_on_gpu and dev.is_gpu:
        u, grad_u = to_host(u), to_host(grad_u)
    elif inputs_on_gpu and not dev.is_gpu:
        u = in_xp.asarray(u)
        grad_u = None if grad_u is None else in_xp.asarray(grad_u)
    return u, grad_u
