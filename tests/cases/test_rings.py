"""Ring builder: circulation, total vorticity, impulse, geometry, velocity at the centre."""
import math

import numpy as np
import pytest

import vortexsim
from vortexsim.cases.rings import cross_section, vortex_ring


@pytest.mark.parametrize("layers", [1, 2, 3, 4])
def test_cross_section_weights(layers):
    pts, w = cross_section(0.1, layers)
    assert len(pts) == 1 + 3 * layers * (layers - 1)
    assert w.sum() == pytest.approx(1.0, abs=1e-15) and (w > 0).all()
    np.testing.assert_allclose((w[:, None] * pts).sum(axis=0), 0, atol=1e-15)   # centred


def test_ring_invariants_and_impulse():
    n_hat = np.array([1.0, 2.0, -0.5]) / np.linalg.norm([1.0, 2.0, -0.5])
    c = np.array([0.3, -1.0, 2.0])
    x, alpha, sigma = vortex_ring(radius=1.2, circulation=0.7, centre=c, axis=n_hat,
                                  core=0.1, n_phi=80, layers=3)
    assert x.shape == alpha.shape == (80 * 19, 3) and sigma.shape == (80 * 19,)
    np.testing.assert_allclose(alpha.sum(axis=0), 0, atol=1e-14)            # closed ring
    np.testing.assert_allclose(x.mean(axis=0), c, atol=1e-12)
    # linear impulse P = ½ Σ x × α = Γ Σ_j w_j π (R + s_j,r)² n̂ (exact for the discretization)
    pts, w = cross_section(0.1, 3)
    expected = 0.7 * math.pi * (w * (1.2 + pts[:, 0]) ** 2).sum() * n_hat
    np.testing.assert_allclose(0.5 * np.cross(x, alpha).sum(axis=0), expected, rtol=1e-12)
    # it is close to Γ π R² n̂ for a thin core
    np.testing.assert_allclose(expected, 0.7 * math.pi * 1.2 ** 2 * n_hat, rtol=0.02)


def test_single_layer_centre_velocity_is_exact():
    x, alpha, _ = vortex_ring(radius=1.0, circulation=1.0, core=0.0, n_phi=100)
    u, _ = vortexsim.induced_velocity(x, alpha, 0.1, np.zeros((1, 3)), gradient=False,
                                      device="cpu")
    q = float(vortexsim.get_kernel("gaussian").q(np.array(10.0), np))
    np.testing.assert_allclose(u[0], [0, 0, 0.5 * q], atol=1e-14)             # moves along +n̂


@pytest.mark.parametrize("kwargs,match", [
    (dict(radius=0), "radius"), (dict(core=1.5), "core"), (dict(n_phi=2), "n_phi"),
    (dict(layers=0), "layers"), (dict(axis=(0, 0, 0)), "axis"), (dict(centre=(1, 2)), "centre"),
    (dict(sigma=-1.0), "sigma")])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        vortex_ring(**kwargs)
