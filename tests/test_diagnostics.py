"""Integral diagnostics against closed forms on rings and hand-made sets."""
import math

import numpy as np
import pytest

from vortexsim import diagnostics as D
from vortexsim.cases.rings import vortex_ring


def test_closed_forms_on_two_elements():
    x = np.array([[1.0, 0, 0], [0, 2.0, 0]])
    a = np.array([[0, 1.0, 0], [0, 0, 3.0]])
    np.testing.assert_allclose(D.total_vorticity(a), [0, 1, 3])
    np.testing.assert_allclose(D.linear_impulse(x, a), 0.5 * (np.cross(x[0], a[0]) + np.cross(x[1], a[1])))
    expect = (np.cross(x[0], np.cross(x[0], a[0])) + np.cross(x[1], np.cross(x[1], a[1]))) / 3
    np.testing.assert_allclose(D.angular_impulse(x, a), expect)


def test_ring_centre_and_radius():
    n_hat = np.array([0.0, 0.6, 0.8])
    c = np.array([1.0, -2.0, 0.5])
    x, a, _ = vortex_ring(radius=0.9, circulation=-1.3, centre=c, axis=n_hat, core=0.0,
                          n_phi=200)
    np.testing.assert_allclose(D.ring_centre(x, a, n_hat, c - 3 * n_hat), c, atol=1e-12)
    assert float(D.ring_radius(x, a, -1.3, n_hat)) == pytest.approx(0.9, rel=1e-12)
    # a thick core: the impulse radius is R (1 + O(σ_c²/R²))
    x, a, _ = vortex_ring(radius=1.0, circulation=1.0, core=0.1, layers=3, n_phi=64)
    assert float(D.ring_radius(x, a, 1.0, (0, 0, 1))) == pytest.approx(1.0, rel=0.02)


def test_translation_shifts_impulses_as_expected():
    x, a, _ = vortex_ring(radius=1.0, circulation=1.0, core=0.1, layers=2, n_phi=40)
    shift = np.array([0.3, -0.7, 2.0])
    # Σα = 0 for a closed ring, so P does not depend on the origin
    np.testing.assert_allclose(D.linear_impulse(x + shift, a), D.linear_impulse(x, a), atol=1e-13)
    assert math.isclose(np.linalg.norm(D.total_vorticity(a)), 0.0, abs_tol=1e-13)
