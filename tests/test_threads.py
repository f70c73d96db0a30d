"""The CPU thread setting (vortexsim.backend.threads) and ``--threads``."""
import pytest

from vortexsim.backend import threads


def test_the_default_is_the_available_cores_and_a_setting_overrides_it(monkeypatch):
    monkeypatch.setattr(threads, "_threads", None)
    assert threads.cpu_threads() == threads.available_cores() >= 1
    threads.set_cpu_threads(3)
    assert threads.cpu_threads() == 3
    threads.set_cpu_threads(None)
    assert threads.cpu_threads() == threads.available_cores()
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="threads"):
            threads.set_cpu_threads(bad)


def test_omp_num_threads_bounds_the_default(monkeypatch):
    monkeypatch.setattr(threads, "_threads", None)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads.cpu_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "not a number")
    assert threads.cpu_threads() == threads.available_cores()
    threads.set_cpu_threads(2)                          # an explicit setting wins
    assert threads.cpu_threads() == 2
    threads.set_cpu_threads(None)


def test_a_cgroup_quota_bounds_the_cores(tmp_path, monkeypatch):
    quota = tmp_path / "cpu.max"
    quota.write_text("150000 100000\n")                  # 1.5 cores: 2
    assert threads._cgroup_quota(str(quota)) == 2
    quota.write_text("max 100000\n")
    assert threads._cgroup_quota(str(quota)) is None
    assert threads._cgroup_quota(str(tmp_path / "none")) is None
    monkeypatch.setattr(threads, "_cgroup_quota", lambda: 1)
    assert threads.available_cores() == 1


def test_the_cli_takes_threads_and_refuses_nonsense(tmp_path, monkeypatch):
    from vortexsim.cli.command import main
    monkeypatch.setattr(threads, "_threads", None)
    out = tmp_path / "run"
    assert main(["run", "taylor_green", "--set", "n=8", "--steps", "1", "--threads", "1",
                 "--out", str(out), "-qq"]) == 0
    assert threads.cpu_threads() == 1
    threads.set_cpu_threads(None)
    assert main(["run", "taylor_green", "--threads", "0", "--out", str(tmp_path / "x")]) == 2



def test_small_lattices_take_one_fft_thread(monkeypatch):
    """The host's lattice FFTs run on one thread below FFT_ONE_THREAD_BELOW points (two
    threads were slower there) and on cpu_threads() above, with the same bits."""
    import numpy as np
    import scipy.fft
    from vortexsim.backend import threads
    from vortexsim.geometry import lattice_modes as lm
    monkeypatch.setattr(threads, "_threads", 2)
    assert lm.fft_workers(24) == 1 and lm.fft_workers(64) == 2
    field = np.random.default_rng(0).random((24, 24, 24))
    np.testing.assert_array_equal(lm.rfft3(field, np), scipy.fft.rfftn(field, workers=2))
