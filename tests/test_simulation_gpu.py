"""The simulation driver on the GPU (marker ``gpu``): CuPy path against the CPU path."""
import numpy as np
import pytest

import vortexsim
from vortexsim.backend import gpu_available, to_host

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA GPU")]

SMALL = dict(n_phi=24, layers=2, tracers_per_ring=200, dt=0.05, progress=False)


def _state(sim):
    return (to_host(sim.elements.x), to_host(sim.elements.alpha), to_host(sim.tracers.x))


@pytest.mark.parametrize("case", ["leapfrog", "ring_ground"])
def test_gpu_direct_matches_cpu_direct(case):
    cpu = vortexsim.make_case(case, device="cpu", method="direct", **SMALL)
    gpu = vortexsim.make_case(case, device="gpu", method="direct", **SMALL)
    cpu.run(steps=5)
    gpu.run(steps=5)
    for a, b in zip(_state(cpu), _state(gpu)):
        assert np.abs(a - b).max() <= 1e-11 * max(1.0, np.abs(a).max())


def test_gpu_fmm_matches_cpu_direct_to_the_tolerance():
    cpu = vortexsim.make_case("leapfrog", device="cpu", method="direct", **SMALL)
    gpu = vortexsim.make_case("leapfrog", device="gpu", method="fmm", tol=1e-6, **SMALL)
    cpu.run(steps=5)
    gpu.run(steps=5)
    (xc, ac, yc), (xg, ag, yg) = _state(cpu), _state(gpu)
    # 5 RK4 steps of dt 0.05 displace points by ~0.05; FMM errors of 1e-6 in u give ~1e-7
    assert np.abs(xc - xg).max() <= 1e-6 and np.abs(yc - yg).max() <= 1e-6
    assert np.abs(ac - ag).max() <= 1e-6 * np.abs(ac).max()


def test_gpu_restart_is_bitwise():
    kw = dict(SMALL, device="gpu", method="fmm", tol=1e-6)
    ref = vortexsim.make_case("leapfrog", **kw)
    ref.run(steps=6)
    first = vortexsim.make_case("leapfrog", **kw)
    first.run(steps=3)
    saved = first.state_dict()
    again = vortexsim.make_case("leapfrog", **kw).load_state_dict(saved)
    again.run(steps=3)
    for a, b in zip(_state(ref), _state(again)):
        assert np.array_equal(a, b)
    assert again.t == ref.t and again.iteration == ref.iteration


def test_gpu_sparse_m2l_time_stepping_equals_dense_and_restarts_bitwise():
    """The stepper's sync-free calls take the sparse M2L, sized at each step's start
    (the step plan's capacity, FMMPlanner.last): same states as the dense M2L, and a restart in between
    continues bitwise."""
    kw = dict(n_phi=126, layers=7, layer_spacing=0.5, sigma=0.05, tracers_per_ring=1 << 16,
              dt=0.01, device="gpu", method="fmm", tol=1e-6, progress=False)
    sparse = vortexsim.make_case("leapfrog", **kw)
    dense = vortexsim.make_case("leapfrog", **kw)
    dense.summation.fmm.SPARSE_M2L_FRACTION = 0.0
    caps = []
    sparse.callbacks.append(lambda sim: caps.append(sim.planner.last.capacity))
    sparse.run(steps=4)
    dense.run(steps=4)
    assert len(caps) == 4 and all(c is not None for c in caps)
    depth, cap, occupied, *_ = caps[-1]
    assert len(occupied) == 2 and all(occupied)
    assert depth == sparse.planner.depth >= 3
    assert cap[-1].sum() < 0.5 * 8 ** depth, "the case must exercise the sparse M2L"
    for a, b in zip(_state(sparse), _state(dense)):
        assert np.abs(a - b).max() <= 1e-12 * np.abs(b).max()
    first = vortexsim.make_case("leapfrog", **kw)
    first.run(steps=2)
    again = vortexsim.make_case("leapfrog", **kw).load_state_dict(first.state_dict())
    again.run(steps=2)
    for a, b in zip(_state(sparse), _state(again)):
        assert np.array_equal(a, b)


def test_gpu_rows_inside_steps_equal_rows_at_once(tmp_path):
    """Diagnostics rows run inside the next step on a second CUDA stream (the fields
    pass of 4736 elements, beside the step's kernels) give bitwise the rows computed at
    once, between the steps; most rows run inside a step."""
    import xarray as xr
    from vortexsim.output.writers import run_writers
    meta = {"case": "leapfrog", "vortexsim_version": "0", "device": "gpu"}
    kw = dict(n_phi=64, layers=4, layer_spacing=0.5, sigma=0.05, tracers_per_ring=4096,
              device="gpu", method="fmm", tol=1e-6, dt=0.05, progress=False)
    rows = {}
    for overlap in (True, False):
        sim = vortexsim.make_case("leapfrog", **kw)
        sim.overlap_rows = overlap
        assert sim.rows.overlap(), "the input must take the fields pass"
        out = tmp_path / str(overlap)
        out.mkdir()
        sim.output_writers.update(run_writers(str(out), meta, "h", 10.0, 0.1, plot=False))
        sim.run(t_end=0.5)
        assert (sim.timings.window_seconds > 0) == overlap
        with xr.open_dataset(out / "diagnostics.nc", decode_cf=False) as d:
            rows[overlap] = {v: d[v].values.copy() for v in d.data_vars}
    assert rows[True].keys() == rows[False].keys()
    for v in rows[True]:
        assert rows[True][v].tobytes() == rows[False][v].tobytes(), v
