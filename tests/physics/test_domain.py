"""Ground-plane images: the mirror rule, sources, boxes and the zero normal velocity."""
import numpy as np
import pytest

import vortexsim
from vortexsim.geometry import FreeSpace, GroundPlane, make_domain, mirror


def test_mirror_rule(rng):
    x, a = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    xi, ai = mirror(x, a, z0=0.3)
    np.testing.assert_array_equal(xi[:, :2], x[:, :2])
    np.testing.assert_allclose(xi[:, 2], 0.6 - x[:, 2], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(ai, a * [-1, -1, 1])
    # an involution
    xb, ab = mirror(xi, ai, z0=0.3)
    np.testing.assert_allclose(xb, x, atol=1e-15)
    np.testing.assert_array_equal(ab, a)


def test_sources_append_images(rng):
    x, a, s = rng.random((4, 3)), rng.normal(size=(4, 3)), rng.random(4) + 0.1
    xs, as_, ss = GroundPlane(0.0).sources(x, a, s)
    assert xs.shape == (8, 3) and as_.shape == (8, 3) and ss.shape == (8,)
    np.testing.assert_array_equal(xs[:4], x)
    np.testing.assert_array_equal(xs[4:], x * [1, 1, -1])
    np.testing.assert_array_equal(ss[4:], s)
    assert FreeSpace().sources(x, a, s)[0] is x


def test_box_and_checks():
    lo, hi = GroundPlane(1.0).extend_box(np.array([0, 0, 2.0]), np.array([1, 1, 3.0]))
    np.testing.assert_array_equal(lo, [0, 0, -1.0])
    np.testing.assert_array_equal(hi, [1, 1, 3.0])
    with pytest.raises(ValueError, match="below the ground plane"):
        GroundPlane(0.0).check(np.array([[0, 0, -0.1]]), "tracers")
    with pytest.raises(ValueError, match="Did you mean 'ground'"):
        make_domain("grund")


@pytest.mark.parametrize("method", ["direct", "fmm"])
def test_normal_velocity_vanishes_on_the_plane(method, rng):
    """Elements (vertical strength, standing on the plane) and tracers on z = 0 have w = 0."""
    x, a, s = vortexsim.cases.vortex_ring(radius=1.0, centre=(0.2, -0.1, 0.7), axis=(0.3, 0.1, -1),
                                          core=0.1, n_phi=32, layers=2)
    foot = np.column_stack([rng.uniform(-1.5, 1.5, (6, 2)), np.zeros(6)])
    x = np.concatenate([x, foot])
    a = np.concatenate([a, np.column_stack([np.zeros((6, 2)), 0.01 * rng.normal(size=6)])])
    s = np.concatenate([s, np.full(6, s[0])])
    tracers = np.column_stack([rng.uniform(-2, 2, (50, 2)), np.zeros(50)])
    sim = vortexsim.Simulation((x, a, s), tracers, dt=0.05, boundary="ground", method=method,
                               device="cpu", progress=False)
    u = sim.velocity()[0]
    ut = sim.velocity(tracers)[0]
    scale = np.abs(u).max()
    assert np.abs(u[-6:, 2]).max() <= 1e-14 * scale
    assert np.abs(ut[:, 2]).max() <= 1e-14 * scale
    assert np.abs(ut[:, :2]).max() > 1e-3 * scale        # the plane is not trivially still
    # and the tracers stay on the plane while the ring approaches
    sim.run(steps=3)
    assert np.abs(sim.tracers.x[:, 2]).max() <= 1e-14
