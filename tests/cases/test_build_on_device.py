"""The lattice cases built on the run's GPU (``builder.on_device``): the same state as
the host's builder (Taylor–Green bitwise; isotropic turbulence to round-off, its
transforms being cuFFT's), and the checks that :func:`vortexsim.state.make_elements`
makes of arrays that are on the device already (here run on NumPy arrays, so that CI
runs them)."""
import numpy as np
import pytest

import vortexsim
from vortexsim.state import _device_elements


def _arrays(n=5):
    x = np.random.default_rng(0).random((n, 3))
    return x, x[::-1].copy()


def test_device_checks_keep_good_arrays():
    x, alpha = _arrays()
    el = _device_elements(x, alpha, 0.1, np, "float64", None, None)
    assert el.x is x and el.alpha is alpha              # kept, not copied
    assert np.array_equal(el.sigma, np.full(5, 0.1)) and np.isnan(el.volume).all()
    assert np.array_equal(el.group, np.full(5, -1)) and el.group.dtype == np.int64
    el = _device_elements(x, alpha, np.full(5, 0.2), np, "float64", 2.0, np.arange(5))
    assert np.array_equal(el.volume, np.full(5, 2.0)) and np.array_equal(el.group, np.arange(5))
    # integers are numbers, as on the host; views become C-ordered arrays
    el = _device_elements(np.ones((5, 3), dtype=np.int32), alpha[:, ::-1], 0.1, np,
                          "float64", None, None)
    assert el.x.dtype == np.float64 and np.array_equal(el.x, np.ones((5, 3)))
    assert el.alpha.flags.c_contiguous and np.array_equal(el.alpha, alpha[:, ::-1])


@pytest.mark.parametrize("change, match", [
    (lambda a: a.update(x=np.ones((5, 2))), "x has shape"),
    (lambda a: a.update(alpha=np.ones((4, 3))), "alpha has shape"),
    (lambda a: a["x"].__setitem__((1, 2), np.nan), "x contains NaN"),
    (lambda a: a["alpha"].__setitem__((0, 0), np.inf), "alpha contains NaN"),
    (lambda a: a.update(sigma=0.0), "sigma must be > 0"),
    (lambda a: a.update(sigma=np.array([0.1, 0.1, np.nan, 0.1, 0.1])), "sigma contains"),
    (lambda a: a.update(sigma=np.ones(4)), "sigma has shape"),
    (lambda a: a.update(volume=-1.0), "volume must be"),
    (lambda a: a.update(group=np.full(5, -2)), "group labels must be"),
    (lambda a: a.update(group=np.zeros(5)), "group must be"),
])
def test_device_checks_refuse_bad_arrays(change, match):
    x, alpha = _arrays()
    args = dict(x=x, alpha=alpha, sigma=0.1, volume=None, group=None)
    change(args)
    with pytest.raises(ValueError, match=match):
        _device_elements(args["x"], args["alpha"], args["sigma"], np, "float64",
                         args["volume"], args["group"])


def test_a_cpu_run_builds_on_the_host():
    """The CPU run's state is the builder's host arrays (the device builder is the GPU's
    only)."""
    from vortexsim.cases.registry import _device_builder, get_case
    case = get_case("taylor_green")
    assert _device_builder(case, {"device": "cpu"}) is None
    assert _device_builder(case, {}) is None            # the case's default device: cpu
    assert _device_builder(get_case("single_ring"), {"device": "cpu"}) is None


def _elements(sim):
    from vortexsim.backend import to_host
    el = sim.elements
    return [to_host(a) for a in (el.x, el.alpha, el.sigma, el.volume, el.group)]


@pytest.mark.gpu
def test_taylor_green_on_the_gpu_is_the_host_state():
    pytest.importorskip("cupy")
    gpu = vortexsim.make_case("taylor_green", n=20, tracers=7, device="gpu", progress=False)
    cpu = vortexsim.make_case("taylor_green", n=20, tracers=7, device="cpu", progress=False)
    for a, b in zip(_elements(gpu), _elements(cpu)):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert np.asarray(gpu.tracers.x.get()).tobytes() == cpu.tracers.x.tobytes()


@pytest.mark.gpu
def test_isotropic_turbulence_on_the_gpu_is_the_host_state(tmp_path):
    cp = pytest.importorskip("cupy")
    from vortexsim.cases.isotropic_turbulence import isotropic_turbulence_field
    from vortexsim.output.lattice_field import read_velocity_field
    gpu = vortexsim.make_case("isotropic_turbulence", n=24, device="gpu", progress=False)
    cpu = vortexsim.make_case("isotropic_turbulence", n=24, device="cpu", progress=False)
    assert isinstance(gpu.case_files["initial_field.nc"].u, cp.ndarray)   # made there
    (xg, ag, *rest_g), (xc, ac, *rest_c) = _elements(gpu), _elements(cpu)
    assert xg.tobytes() == xc.tobytes()
    for a, b in zip(rest_g, rest_c):                    # σ, volumes, labels
        assert a.tobytes() == b.tobytes()
    assert np.abs(ag - ac).max() <= 1e-12 * np.abs(ac).max()
    assert np.abs(ag.sum(axis=0)).max() <= 1e-12 * np.abs(ag).sum()   # Σα = 0
    gpu.case_files["initial_field.nc"](tmp_path / "u.nc", gpu.config)
    u, *_ = read_velocity_field(tmp_path / "u.nc")
    ref = np.moveaxis(isotropic_turbulence_field(24, 4.0, 0.5, 0), -1, 0)
    np.testing.assert_allclose(u, ref, rtol=0, atol=1e-12)
