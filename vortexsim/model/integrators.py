r"""Explicit time integrators, registered by name (Dedalus-style ``@register_scheme``).

A state is a tuple of arrays (NumPy or CuPy); ``rhs(state, t)`` returns a tuple of
time derivatives of the same shapes.  Each scheme advances ``state`` from ``t`` to
``t + dt`` and returns the new state (new arrays; the input is not modified).

=======  =====  =====================================================================
name     order  update
=======  =====  =====================================================================
euler    1      y₁ = y₀ + dt f(t₀, y₀)
rk2      2      midpoint: k₁ = f(t₀, y₀), y₁ = y₀ + dt f(t₀ + dt/2, y₀ + dt/2 k₁)
rk4      4      classic Runge–Kutta (Kutta 1901): y₁ = y₀ + dt/6 (k₁ + 2k₂ + 2k₃ + k₄)
=======  =====  =====================================================================

Every stage calls ``rhs`` once (the FMM rebuilds its tree there).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from .._names import did_you_mean

__all__ = ["Scheme", "SCHEMES", "register_scheme", "get_scheme", "REAL_AXIS_STABILITY"]


@dataclasses.dataclass(frozen=True)
class Scheme:
    """A named explicit scheme: ``step(state, t, dt, rhs) -> state``; ``order``; ``stages``."""

    name: str
    order: int
    stages: int
    step: Callable


SCHEMES: dict[str, Scheme] = {}

#: the stability interval [−s, 0] of dt λ on the negative real axis of each scheme
#: (dy/dt = λ y, λ < 0: the stiff part of a diffusion step)
REAL_AXIS_STABILITY = {"euler": 2.0, "rk2": 2.0, "rk4": 2.785}


def register_scheme(name, order, stages):
    """Decorator adding a step function to :data:`SCHEMES` under ``name``."""
    def wrap(fn):
        if name in SCHEMES:
            raise ValueError(f"scheme {name!r} is already registered.")
        SCHEMES[name] = Scheme(name, order, stages, fn)
        return fn
    return wrap


def get_scheme(name) -> Scheme:
    """Look a scheme up by name; the error names the known ones and the closest match."""
    if name in SCHEMES:
        return SCHEMES[name]
    raise ValueError(f"Unknown time integrator {name!r}; expected one of {sorted(SCHEMES)}."
                     f"{did_you_mean(name, SCHEMES)}")


def _axpy(y, a, k):
    """y + a k, element-wise over the tuple."""
    return tuple(yi + a * ki for yi, ki in zip(y, k))


@register_scheme("euler", order=1, stages=1)
def euler_step(state, t, dt, rhs):
    """Forward Euler: y₁ = y₀ + dt f(t₀, y₀)."""
    return _axpy(state, dt, rhs(state, t))


@register_scheme("rk2", order=2, stages=2)
def rk2_step(state, t, dt, rhs):
    """Explicit midpoint rule: y₁ = y₀ + dt f(t₀ + dt/2, y₀ + dt/2 f(t₀, y₀))."""
    k1 = rhs(state, t)
    k2 = rhs(_axpy(state, 0.5 * dt, k1), t + 0.5 * dt)
    return _axpy(state, dt, k2)


@register_scheme("rk4", order=4, stages=4)
def rk4_step(state, t, dt, rhs):
    """Classic fourth-order Runge–Kutta."""
    k1 = rhs(state, t)
    k2 = rhs(_axpy(state, 0.5 * dt, k1), t + 0.5 * dt)
    k3 = rhs(_axpy(state, 0.5 * dt, k2), t + 0.5 * dt)
    k4 = rhs(_axpy(state, dt, k3), t + dt)
    return tuple(y + dt / 6.0 * (a + 2.0 * b + 2.0 * c + d)
                 for y, a, b, c, d in zip(state, k1, k2, k3, k4))
