"""Time integrators: registry, and measured order of convergence on a nonlinear ODE."""
import math

import numpy as np
import pytest

from vortexsim.model.integrators import SCHEMES, get_scheme, register_scheme


def _rhs(state, t):
    """y' = −y² + cos t (componentwise), plus a rotation block: a nonlinear test system."""
    y, z = state
    return (-y * y + np.cos(t), np.stack([-z[1], z[0]]))


def _solve(scheme, dt, t_end=1.0):
    state = (np.array([0.5, 1.0]), np.array([1.0, 0.0]))
    t = 0.0
    for _ in range(round(t_end / dt)):
        state = scheme.step(state, t, dt, _rhs)
        t += dt
    return state


@pytest.mark.parametrize("name,order", [("euler", 1), ("rk2", 2), ("rk4", 4)])
def test_measured_order(name, order):
    scheme = get_scheme(name)
    assert scheme.order == order
    ref = _solve(get_scheme("rk4"), 1 / 2048)
    errs = [np.linalg.norm(np.concatenate(_solve(scheme, dt)) - np.concatenate(ref))
            for dt in (1 / 16, 1 / 32, 1 / 64)]
    rates = [math.log2(errs[i] / errs[i + 1]) for i in range(2)]
    assert all(abs(r - order) < 0.3 for r in rates), rates


def test_rotation_block_is_exact_in_the_limit():
    y, z = _solve(get_scheme("rk4"), 1 / 256)
    np.testing.assert_allclose(z, [math.cos(1.0), math.sin(1.0)], rtol=1e-9)


def test_registry_errors():
    with pytest.raises(ValueError, match="Did you mean 'rk4'"):
        get_scheme("rk44")
    with pytest.raises(ValueError, match="already registered"):
        register_scheme("euler", 1, 1)(lambda *a: None)
    assert set(SCHEMES) >= {"euler", "rk2", "rk4"}


def test_input_state_is_not_modified():
    state = (np.array([0.5, 1.0]), np.array([1.0, 0.0]))
    copy = tuple(a.copy() for a in state)
    for scheme in SCHEMES.values():
        scheme.step(state, 0.0, 0.1, _rhs)
        for a, b in zip(state, copy):
            assert (a == b).all()
