"""Feedback before long CPU work (vortexsim.cli.resources.announce_cpu_cost): the first
evaluation's estimate and the warning when a GPU preset runs on the CPU, printed before
the case is built."""
import logging

import pytest

from vortexsim.cli import resources as R


def _est(n, m):
    return R.Estimate(n, m, n, "cpu", 0, 0)


def test_the_estimate_follows_the_method_and_the_size():
    fmm = {"method": "fmm"}
    assert R.cpu_seconds(fmm, _est(1000, 0)) == pytest.approx(1000 * R.CPU_SECONDS["fmm"][0])
    assert R.cpu_seconds(fmm, _est(0, 1000)) == pytest.approx(1000 * R.CPU_SECONDS["fmm"][1])
    direct = {"method": "direct"}
    assert R.cpu_seconds(direct, _est(2000, 1000)) == pytest.approx(
        2000 * 3000 / R.CPU_DIRECT_PAIRS)
    assert R.announce_cpu_cost(fmm, R.Estimate(10, 0, 10, "gpu", 0, 0)) is None


def test_a_gpu_preset_on_the_cpu_is_announced(caplog):
    config = {"method": "fmm", "integrator": "rk4", "dt": 0.1, "t_end": 20.0,
              "adaptive": True}
    with caplog.at_level(logging.INFO, logger="vortexsim.cli"):
        seconds = R.announce_cpu_cost(config, _est(45000, 1 << 20), preset="gpu")
    text = caplog.text
    assert seconds > R.ANNOUNCE_SECONDS
    assert "sized for a GPU" in text and "200 steps (more: dt adapts below it)" in text
    assert "first velocity evaluation on the CPU takes up to about" in text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="vortexsim.cli"):
        R.announce_cpu_cost(config, _est(448, 1024))      # the CPU default: nothing to say
    assert not caplog.text


def test_the_cli_says_it_before_building_the_case(tmp_path, monkeypatch, capsys):
    """``vortexsim run leapfrog --preset gpu --device cpu``: the warning and the estimate
    come before the case is built (here the build is cut short)."""
    import vortexsim.cases
    from vortexsim.cli.command import main

    def stop(*args, **kwargs):
        raise ValueError("stopped by the test")
    monkeypatch.setattr(vortexsim.cases, "make_case", stop)
    assert main(["run", "leapfrog", "--preset", "gpu", "--device", "cpu", "--out",
                 str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "sized for a GPU" in err and "first velocity evaluation" in err
    assert err.index("sized for a GPU") < err.index("stopped by the test")
