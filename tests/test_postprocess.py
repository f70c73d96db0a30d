"""The analysis toolkit ``postprocess`` (issue 18): open_run, diagnostics and spectra,
ring tracking, spectral slope, plots and the ``analyze`` / ``plot`` commands."""
from __future__ import annotations

import argparse
import os
import re
import sys

import numpy as np
import pytest

import postprocess

from postprocess import (open_diagnostics, open_run, open_spectra, plot_comparison,
                         plot_run, spectral_slope, track_rings)
from postprocess.cli import add_command
from vortexsim.cli import UsageError, main
from vortexsim.output.diagnostics import DiagnosticsLog
from vortexsim.output.snapshot import read_snapshot
from vortexsim.output.writers import snapshot_files

pytest.importorskip("matplotlib")

#: two rings: (name, speed along the axis, axis, radius at t = 0, dR/dt)
RINGS = (("front", 0.37, np.array([0.0, 0.6, 0.8]), 1.0, -0.01),
         ("rear", -1.25, np.array([1.0, 0.0, 0.0]), 0.5, 0.02))


def _rows(times, rings=RINGS, energy=lambda t: 1.0 - 0.1 * t):
    """Rows like those of ``Simulation.diagnostics()``: each ring's centre moves at its
    constant speed along its fixed axis from a start point off the axis."""
    rows = []
    start = np.array([[0.3, -0.2, 1.5], [-2.0, 0.4, 0.1]])
    for i, t in enumerate(times):
        centre = np.stack([start[j] + s * t * n for j, (_, s, n, _, _) in enumerate(rings)])
        rows.append({
            "t": float(t), "iteration": i, "dt_next": 0.1,
            "total_vorticity": np.zeros(3), "linear_impulse": np.array([0.0, 0.0, 3.14 + t]),
            "angular_impulse": np.zeros(3), "energy": energy(t), "helicity": 0.01 * t,
            "enstrophy": 2.0, "ring_names": [r[0] for r in rings], "ring_centre": centre,
            "ring_radius": np.array([r0 + dr * t for _, _, _, r0, dr in rings]),
            "ring_axis": np.stack([n for _, _, n, _, _ in rings])})
    return rows


def _write(run_dir, rows, case="synthetic"):
    os.makedirs(run_dir, exist_ok=True)
    DiagnosticsLog(os.path.join(run_dir, "diagnostics.nc"), {"case": case}, rows).write()
    return str(run_dir)


def _periodic_rows(times, amplitude=1.0):
    """Periodic-box rows with a power-law spectrum E(k) = A e^{-t} k^(-5/3), k >= 1."""
    k = np.arange(0.0, 33.0)
    rows = []
    for i, t in enumerate(times):
        e = np.zeros_like(k)
        e[1:] = amplitude * np.exp(-t) * k[1:] ** (-5.0 / 3.0)
        energy = float(e.sum())
        rows.append({"t": float(t), "iteration": i, "dt_next": 0.1,
                     "total_vorticity": np.zeros(3), "linear_impulse": np.zeros(3),
                     "angular_impulse": np.zeros(3), "energy": energy, "helicity": 0.0,
                     "enstrophy": 1.0, "mean_energy": energy, "dissipation": energy,
                     "particle_energy": energy, "particle_dissipation": energy,
                     "lattice_energy": energy, "lattice_dissipation": energy,
                     "lattice_enstrophy": 1.0, "u_rms": 1.0, "integral_scale": 1.0,
                     "taylor_scale": 0.1, "re_lambda": 50.0 - t, "kolmogorov_eta": 0.01,
                     "k_max_eta": 1.5, "skewness": -0.5 * t, "flatness": 3.0 + t,
                     "wavenumber": k, "energy_spectrum": e})
    return rows


def _parser():
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=0)
    parser = argparse.ArgumentParser(prog="vortexsim")
    add_command(parser.add_subparsers(dest="command", required=True), common)
    return parser


def _cli(argv):
    args = _parser().parse_args(argv)
    return args.func(args, argv)


def test_a_ring_moved_at_constant_speed_gives_that_speed(tmp_path):
    times = np.cumsum(np.r_[0.0, np.linspace(0.05, 0.2, 12)])       # uneven rows
    run = _write(tmp_path / "run", _rows(times))
    rings = track_rings(run)
    assert list(rings["ring"].values) == ["front", "rear"]
    assert {name: rings[name].attrs.get("case_units") for name in rings.data_vars} == {
        "centre": "L", "axis": None, "radius": "L", "position": "L", "velocity": "L/T",
        "speed": "L/T"}
    for j, (_, speed, axis, r0, dr) in enumerate(RINGS):
        s = rings["speed"].values[:, j]
        np.testing.assert_allclose(s[1:-1], speed, rtol=0, atol=1e-12)
        np.testing.assert_allclose(s, speed, rtol=0, atol=1e-10)      # edges: 2nd order
        np.testing.assert_allclose(rings["velocity"].values[1:-1, j],
                                   np.broadcast_to(speed * axis, (times.size - 2, 3)),
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(rings["radius"].values[:, j], r0 + dr * times)
    # the same from the dataset of open_diagnostics
    diag = open_diagnostics(run)
    assert diag["ring_centre"].dims == ("t", "ring", "component")
    assert diag.attrs["case"] == "synthetic"
    np.testing.assert_array_equal(track_rings(diag)["speed"].values, rings["speed"].values)


def test_a_power_law_spectrum_gives_its_slope(tmp_path):
    k = np.geomspace(1.0, 100.0, 40)
    assert spectral_slope(k, k ** (-5.0 / 3.0), 1.0, 100.0) == pytest.approx(-5 / 3,
                                                                              abs=1e-12)
    assert spectral_slope(k, 7.0 * k ** -3.0, 10.0, 50.0) == pytest.approx(-3, abs=1e-12)
    with pytest.raises(ValueError, match="fewer than two"):
        spectral_slope(k, k ** -2.0, 200.0, 300.0)
    run = _write(tmp_path / "box", _periodic_rows([0.0, 0.5, 1.0]))
    spectra = open_spectra(run)
    assert spectra["energy_spectrum"].dims == ("t", "wavenumber")
    assert spectra["wavenumber"].attrs["case_units"] == "1/L"
    for row in spectra["energy_spectrum"].values:          # shell 0 (E = 0) skipped
        slope = spectral_slope(spectra["wavenumber"].values, row, 1.0, 32.0)
        assert slope == pytest.approx(-5 / 3, abs=1e-12)
    assert open_spectra(_write(tmp_path / "ring", _rows([0.0, 1.0]))) is None


def _read_png(path):
    import matplotlib.image

    assert os.path.getsize(path) > 1000
    image = matplotlib.image.imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert np.ptp(image[..., :3]) > 0.5          # not blank
    return image


def test_plots_write_pngs_and_different_runs_differ(tmp_path):
    times = np.linspace(0.0, 2.0, 11)
    slow = _write(tmp_path / "slow", _rows(times))
    fast = _write(tmp_path / "fast", _rows(times, [(n, 3 * s, a, r, 4 * d)
                                                   for n, s, a, r, d in RINGS],
                                           energy=lambda t: 1.0 - 0.3 * t))
    box = _write(tmp_path / "box", _periodic_rows(times))
    paths = {d: plot_run(d) for d in (slow, fast, box)}
    assert [os.path.basename(p) for p in paths[slow]] == ["plot_energy.png",
                                                         "plot_rings.png"]
    assert [os.path.basename(p) for p in paths[box]] == [
        "plot_energy.png", "plot_spectra.png", "plot_dissipation.png"]
    for p in sum(paths.values(), []):
        _read_png(p)
    for a, b in zip(paths[slow], paths[fast]):
        image_a, image_b = _read_png(a), _read_png(b)
        assert image_a.shape != image_b.shape or not np.array_equal(image_a, image_b)
    assert not [f for f in os.listdir(slow) if f.endswith(".tmp")]      # atomic writes
    out = plot_comparison([slow, fast], "ring_speed", tmp_path / "cmp.png")
    assert out == str(tmp_path / "cmp.png")
    _read_png(out)
    _read_png(plot_comparison([slow, fast], "linear_impulse", tmp_path / "imp.png"))
    with pytest.raises(ValueError, match="no energy spectra"):
        plot_run(slow, what="spectra")
    with pytest.raises(ValueError, match="two or more runs"):
        plot_comparison([slow], "energy")


def test_identical_runs_compared_both_show(tmp_path):
    """Two runs of the same rows: their curves coincide, so each run has its own dash
    pattern, marker and width (not only a colour); rings of one run share its style."""
    from postprocess.plots import comparison_figure

    times = np.linspace(0.0, 2.0, 11)
    a, b = _write(tmp_path / "a", _rows(times)), _write(tmp_path / "b", _rows(times))
    lines = comparison_figure([a, b], "energy").axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["a", "b"]
    np.testing.assert_array_equal(lines[0].get_ydata(), lines[1].get_ydata())
    assert lines[0].get_linestyle() != lines[1].get_linestyle()
    assert lines[0].get_marker() != lines[1].get_marker()
    assert lines[0].get_linewidth() > lines[1].get_linewidth()
    lines = comparison_figure([a, b], "ring_radius").axes[0].get_lines()
    style = {line.get_label(): (line.get_linestyle(), line.get_marker(), line.get_color())
             for line in lines}
    assert style["a: front"][:2] == style["a: rear"][:2] != style["b: front"][:2]
    assert style["a: front"][2] == style["b: front"][2] != style["a: rear"][2]


def _texts(ax):
    return [x.get_text() for x in ax.texts]


def test_conserved_quantities_are_drawn_flat_with_their_variation(tmp_path):
    """A ring's helicity (1e-17) and impulse (1e-8 relative change) are no signals: their
    panels are flat and say how well each is conserved; a helicity that changes keeps
    its curve."""
    from postprocess.plots import comparison_figure, energy_figure

    times = np.linspace(0.0, 2.0, 21)
    rows = _rows(times, energy=lambda t: 0.8 + 1e-4 * np.sin(t))
    noise = np.random.default_rng(0).normal(size=(times.size, 3))
    for row, n in zip(rows, noise):
        row["helicity"] = 1e-17 * n[0]
        row["linear_impulse"] = np.array([1e-18 * n[1], 0.0, 3.14 * (1 + 1e-8 * n[2])])
    ring = _write(tmp_path / "ring", rows)
    ax = energy_figure(ring).axes
    assert _texts(ax[0]) == []                              # 1e-4: a curve
    assert len(_texts(ax[1])) == 1 and _texts(ax[1])[0].startswith("conserved to ")
    assert _texts(ax[1])[0].endswith("(round-off)")
    lo, hi = ax[1].get_ylim()
    assert 1e-6 < hi - lo < 1e-3                            # not a 1e-17 window
    assert len(_texts(ax[2])) == 1 and _texts(ax[2])[0].startswith("conserved to ")
    assert "round-off" not in _texts(ax[2])[0]              # 1e-8: the method's, said so
    ax = energy_figure(_write(tmp_path / "moving", _rows(times))).axes
    assert _texts(ax[1]) == [] and _texts(ax[2]) == []
    # in a comparison too
    other = _write(tmp_path / "other", rows)
    assert _texts(comparison_figure([ring, other], "helicity").axes[0])[0].startswith(
        "conserved to ")


def test_spectra_start_at_the_first_resolved_value_and_dissipation_is_explained(tmp_path):
    from postprocess.plots import comparison_figure, dissipation_figure, spectra_figure

    times = np.linspace(0.0, 1.0, 11)
    rows = _periodic_rows(times)
    for row in rows:
        row["energy_spectrum"][20:] = 1e-35                 # FFT round-off past the band
    box = _write(tmp_path / "box", rows)
    for fig in (spectra_figure(box), comparison_figure([box, box + "/"],
                                                        "energy_spectrum")):
        for line in fig.axes[0].get_lines():
            if line.get_label() == "k^(-5/3)":
                continue
            k, e = line.get_xdata(), line.get_ydata()
            assert k[0] == 1.0 and k[-1] == 19.0 and e.min() > 1e-12 * e.max()
    legend = dissipation_figure(box).axes[0].get_legend()
    labels = [x.get_text() for x in legend.get_texts()]
    assert labels[0].startswith("ε = ") and labels[1].startswith("−dE/dt from the energy")
    assert any(x.startswith("ν⟨ω_p·ω⟩") for x in labels)
    assert legend.get_title().get_text() == ""              # ε = −dE/dt here
    for row in rows:
        row["lattice_dissipation"] *= 1.5                   # ε above what E loses
    legend = dissipation_figure(_write(tmp_path / "gap", rows)).axes[0].get_legend()
    assert re.match(r"mean −dE/dt 3\d% below mean ε: .*E_p", legend.get_title().get_text(),
                    re.S)


def test_analyze_prints_rings_and_turbulence_statistics(tmp_path, capsys):
    run = _write(tmp_path / "run", _rows(np.linspace(0.0, 1.0, 6)))
    assert _cli(["analyze", run]) == 0
    text = capsys.readouterr().out
    front = next(line for line in text.splitlines() if line.startswith("front"))
    assert [float(v) for v in front.split()[1:]] == pytest.approx([0.37, 1.0, 0.99])
    box = _write(tmp_path / "box", _periodic_rows([0.0, 0.5, 1.0]))
    assert _cli(["analyze", box]) == 0
    lines = capsys.readouterr().out.splitlines()
    for label, start, end in (("Re_lambda", 50.0, 49.0), ("skewness", 0.0, -0.5),
                              ("flatness", 3.0, 4.0)):
        line = next(x for x in lines if x.startswith(label + " "))
        assert [float(v) for v in line.split()[1:3]] == pytest.approx([start, end])
    assert any(x.startswith("epsilon ") for x in lines)
    assert any(x.startswith("E ") for x in lines)


def test_plot_command_one_run_and_a_comparison(tmp_path, capsys):
    times = np.linspace(0.0, 1.0, 5)
    a, b = _write(tmp_path / "a", _rows(times)), _write(tmp_path / "b", _rows(2 * times))
    assert _cli(["plot", a, "--what", "rings", "--out", str(tmp_path / "r.png")]) == 0
    assert _cli(["plot", a, b, "--what", "rings", "--out", str(tmp_path / "c.png")]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "r.png"),
                                                str(tmp_path / "c.png")]
    _read_png(tmp_path / "r.png")
    _read_png(tmp_path / "c.png")
    with pytest.raises(UsageError, match="has no energy spectra"):
        _cli(["plot", a, "--what", "spectra"])


@pytest.mark.parametrize("command", ["analyze", "plot"])
def test_commands_refuse_a_directory_that_is_not_a_run(command, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    for path, message in ((tmp_path / "empty", "is not a vortexsim run directory"),
                          (tmp_path / "missing", "does not exist"),
                          (tmp_path / "file.txt", "is not a directory")):
        with pytest.raises(UsageError, match=message) as info:
            _cli([command, str(path)])
        assert "\n" not in str(info.value) and str(path) in str(info.value)
    with pytest.raises(ValueError, match="not a vortexsim run directory"):
        open_run(tmp_path / "empty")
    if command == "plot":            # a comparison checks every directory
        run = _write(tmp_path / "run", _rows([0.0, 1.0]))
        with pytest.raises(UsageError, match="not a vortexsim run directory"):
            _cli(["plot", run, str(tmp_path / "empty")])


def test_open_run_of_a_tiny_run_has_the_snapshot_times(tmp_path, capsys):
    out = tmp_path / "ring"
    assert main(["run", "single_ring", "--set", "n_phi=6", "--set", "layers=1", "--set",
                 "tracers_per_ring=6", "--device", "cpu", "-q", "--set", "plot=false",
                 "--set", "t_end=0.4", "--set", "snapshot_interval=0.2", "--set",
                 "diagnostics_interval=0.1", "--out", str(out)]) == 0
    capsys.readouterr()
    snaps = [read_snapshot(p) for _, p in sorted(snapshot_files(out).items())]
    ds = open_run(out)
    np.testing.assert_array_equal(ds["t"].values, [s.t for s in snaps])
    np.testing.assert_allclose(ds["t"].values, [0.0, 0.2, 0.4], atol=1e-12)
    assert list(ds["iteration"].values) == [s.iteration for s in snaps]
    assert ds["element_x"].attrs["case_units"] == "L"
    assert not isinstance(ds["element_x"].variable._data, np.ndarray)     # not loaded
    np.testing.assert_array_equal(ds["element_x"].isel(t=-1).values,
                                  snaps[-1].state["elements"]["x"])
    np.testing.assert_array_equal(ds["tracer_x"][1:, :2].values,
                                  [s.state["tracers"]["x"][:2] for s in snaps[1:]])
    assert ds.attrs["case"] == "single_ring"
    # the real run through the other entry points
    rings = track_rings(out)
    assert rings.sizes["t"] == 5 and np.all(rings["speed"].values > 0)
    assert _cli(["analyze", str(out)]) == 0
    assert "mean speed" in capsys.readouterr().out
    assert len(plot_run(out)) == 2
    # the old script still works
    sys.path.insert(0, os.path.join(os.path.dirname(postprocess.__file__)))
    try:
        import plot_run as script
    finally:
        sys.path.pop(0)
    assert script.main([str(out), str(tmp_path / "old.png")]) == 0
    _read_png(tmp_path / "old.png")


def test_open_run_pads_snapshots_of_different_sizes(tmp_path):
    """Remeshing in free space changes the element count: the smaller snapshot is padded
    with NaN and n_element gives each count; values are read on indexing only."""
    import netCDF4

    for it, n in ((0, 2), (5, 3)):
        with netCDF4.Dataset(tmp_path / f"snapshot_{it:08d}.nc", "w") as nc:
            nc.vortexsim_format = "vortexsim snapshot"
            for dim, size in (("time", 1), ("element", n), ("component", 3)):
                nc.createDimension(dim, size)
            nc.createVariable("time", "f8", ("time",))[:] = [0.1 * it]
            nc.createVariable("iteration", "i8", ("time",))[:] = [it]
            x = nc.createVariable("element_x", "f8", ("time", "element", "component"))
            x.units = "L"
            x[:] = np.arange(3.0 * n).reshape(1, n, 3) + it
    ds = open_run(tmp_path)
    assert list(ds["n_element"].values) == [2, 3] and ds["element_x"].shape == (2, 3, 3)
    x = ds["element_x"].values
    np.testing.assert_array_equal(x[0, :2], np.arange(6.0).reshape(2, 3))
    assert np.all(np.isnan(x[0, 2]))
    np.testing.assert_array_equal(x[1], np.arange(9.0).reshape(3, 3) + 5)
    np.testing.assert_array_equal(ds["element_x"][:, 1, 2].values, [5.0, 10.0])
    np.testing.assert_allclose(ds["t"].values, [0.0, 0.5])
