"""The summation interface (vortexsim.summation): the factory, the siblings, the "auto"
rule and the slot of the planned methods."""
import numpy as np
import pytest

from vortexsim.backend import Device
from vortexsim.geometry import check_periodic_sources, periodic_nodes, wrap
from vortexsim.summation import (SUMMATIONS, DirectSum, FMMSum, PeriodicSpectralSum,
                                 Summation, choose_method, induced_velocity, make_summation)

CPU = Device("cpu")


def _state(n=60, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, (n, 3))
    alpha = rng.normal(size=(n, 3))
    alpha -= alpha.mean(axis=0)                       # Σα = 0 (the periodic box)
    return x, alpha, np.full(n, 0.12)


def test_factory_makes_the_sibling_of_each_method():
    assert isinstance(make_summation("direct", device=CPU), DirectSum)
    assert isinstance(make_summation("fmm", device=CPU), FMMSum)
    assert isinstance(make_summation("spectral", device=CPU, box=1.0), PeriodicSpectralSum)
    assert isinstance(make_summation("auto", device=CPU, box=1.0), PeriodicSpectralSum)
    assert isinstance(make_summation("fmm", "polynomial", device=CPU, box=1.0), FMMSum)
    for method, cls in SUMMATIONS.items():
        assert issubclass(cls, Summation) and cls.name == method


def test_every_sibling_reports_what_it_is_its_memory_and_its_state():
    for s in (make_summation("direct", device=CPU), make_summation("fmm", device=CPU),
              make_summation("spectral", device=CPU, box=1.0)):
        assert s.describe() == {"method": s.method, "kernel": "gaussian", "tol": 1e-6,
                                "precision": "float64"}
        assert s.memory_estimate(1000, 2000) > s.memory_estimate(10, 20) > 0
        assert s.load_state_dict(s.state_dict()) is s


def test_direct_call_matches_induced_velocity_with_self_pairs_removed():
    x, alpha, sigma = _state()
    u, g = make_summation("direct", device=CPU)(x, alpha, sigma, x, n_self=len(x))
    u_ref, g_ref = induced_velocity(x, alpha, sigma)
    np.testing.assert_allclose(u, u_ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=1e-12)


def test_spectral_sibling_matches_induced_velocity_in_the_box():
    x, alpha, sigma = _state()
    u, g = make_summation("spectral", device=CPU, box=1.0)(x, alpha, sigma, x,
                                                           n_self=len(x))
    u_ref, g_ref = induced_velocity(x, alpha, sigma, method="spectral", box=1.0)
    np.testing.assert_allclose(u, u_ref, rtol=0, atol=1e-12 * np.abs(u_ref).max())
    np.testing.assert_allclose(g, g_ref, rtol=0, atol=1e-10 * np.abs(g_ref).max())


def test_the_auto_rule():
    assert choose_method(100, 100) == "direct"
    assert choose_method(10 ** 4, 10 ** 4) == "fmm"
    assert choose_method(10 ** 4, 10 ** 4, gpu=True) == "direct"
    assert choose_method(10 ** 4, 10 ** 4, tol=1e-12) == "direct"
    assert choose_method(periodic=True) == "spectral"
    assert choose_method(periodic=True, uniform_sigma=False) == "fmm"
    assert choose_method(periodic=True, kernel="singular") == "fmm"
    with pytest.raises(ValueError, match="kernel"):
        choose_method(periodic=True, kernel="algebraic")
    with pytest.raises(ValueError, match="n_sources"):
        choose_method()


def test_planned_methods_have_a_slot_that_says_so():
    with pytest.raises(ValueError, match="periodic"):       # the mesh solve needs the box
        make_summation("mesh", device=CPU)
    with pytest.raises(ValueError, match="Gaussian"):
        make_summation("mesh", kernel="algebraic", device=CPU, box=1.0)
    with pytest.raises(NotImplementedError, match="communicator"):
        make_summation("distributed", device=CPU)


def test_periodic_geometry():
    assert periodic_nodes(1.0, 0.125) == 8
    w = wrap(np.array([-0.25, 1.0, 2.5]), 1.0)
    np.testing.assert_array_equal(w, [0.75, 0.0, 0.5])
    check_periodic_sources(np.array([[1.0, 0, 0], [-1.0, 0, 0]]))
    with pytest.raises(ValueError, match="total vorticity"):
        check_periodic_sources(np.array([[1.0, 0, 0], [1.0, 0, 0]]))
