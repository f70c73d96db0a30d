"""The plot of a run (vortexsim/output/plot.py): the tracers' density image, plot_run and
plot_rows."""
from __future__ import annotations

import os

import numpy as np
import pytest

import vortexsim
from vortexsim.output.diagnostics import read_rows
from vortexsim.output.plot import _box, _density, latest_snapshot, plot_rows, plot_run, preload
from vortexsim.output.writers import run_writers

META = {"case": "leapfrog", "vortexsim_version": "0", "device": "cpu"}


def test_density_counts_are_those_of_histogram2d():
    rng = np.random.default_rng(1)
    y = rng.normal(0.0, [1.0, 1.0, 0.3], (20000, 3))
    y[:3] = [[y[:, 0].max(), 0, 0], [0, 0, y[:, 2].min()], [0, 0, 0]]   # edges, a centre
    extent, (nx, nz) = _box(y)
    x0, x1, z0, z1 = extent
    assert max(nx, nz) == 400 and np.isclose((x1 - x0) / nx, (z1 - z0) / nz)  # square
    assert x0 < y[:, 0].min() and x1 > y[:, 0].max() and z0 < y[:, 2].min()
    counts = _density(y[:, 0], y[:, 2], extent, (nx, nz))
    want, _, _ = np.histogram2d(y[:, 0], y[:, 2], bins=(nx, nz), range=[extent[:2],
                                                                        extent[2:]])
    assert counts.shape == (nz, nx) and np.array_equal(counts, want.T)
    assert counts.sum() == len(y)


@pytest.mark.parametrize("tracers", [0, 2048])
def test_plot_run_writes_a_png(tracers, tmp_path):
    pytest.importorskip("matplotlib")
    sim = vortexsim.make_case("leapfrog", n_phi=8, layers=1, tracers_per_ring=tracers,
                              device="cpu", progress=False, dt=0.1)
    sim.output_writers.update(run_writers(str(tmp_path), META, "", 0.2, 0.1, plot=False))
    sim.run(t_end=0.2)
    path = plot_run(str(tmp_path))
    assert path == str(tmp_path / "plot.png")
    assert (tmp_path / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_preload_draws_the_plots_own_figure():
    """The warm-up draws the figure of plot_run (through the same _draw) on made-up data;
    it never raises, so a failure would only show as False."""
    pytest.importorskip("matplotlib")
    preload.cache_clear()
    assert preload() is True


def test_the_runs_plot_is_plot_runs_figure_drawn_from_memory(tmp_path):
    """The run's plot writer draws plot.png on the main thread from the rows and the state
    in memory: the picture plot_run makes from the files afterwards, pixel for pixel
    (same rows, same final state, same title); and plot_rows, given the files' rows,
    draws it too."""
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread
    sim = vortexsim.make_case("leapfrog", n_phi=8, layers=1, tracers_per_ring=256,
                              device="cpu", progress=False, dt=0.1)
    sim.output_writers.update(run_writers(str(tmp_path), META, "", 0.2, 0.1))
    sim.run(t_end=0.3)
    assert sim.run_timings["plot"][1] == 1 and "plot" not in sim.output_timings
    drawn = imread(str(tmp_path / "plot.png"))
    assert np.array_equal(drawn, imread(plot_run(str(tmp_path), str(tmp_path / "a.png"))))
    snap = latest_snapshot(str(tmp_path))          # the state at the end: sim's
    b = plot_rows(read_rows(tmp_path / "diagnostics.nc"), sim.elements.x, sim.tracers.x,
                  sim.t, f"vortexsim: leapfrog  ({os.path.basename(snap)})",
                  str(tmp_path / "b.png"))
    assert np.array_equal(drawn, imread(b))


def test_a_periodic_run_plots_energy_dissipation_and_spectra(tmp_path):
    """A periodic run's plot.png (energy, ε and −dE/dt, E(k) above the round-off floor):
    the run's writer and plot_run from the files draw the same picture; a spectrum's
    round-off tail and k = 0 are not drawn."""
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    from vortexsim.output.plot_box import SPECTRUM_FLOOR, draw_box
    sim = vortexsim.make_case("taylor_green", n=8, device="cpu", progress=False)
    sim.output_writers.update(run_writers(str(tmp_path), {**META, "case": "taylor_green"},
                                          "", 0.2, 0.1))
    sim.run(t_end=0.3)
    drawn = imread(str(tmp_path / "plot.png"))
    assert np.array_equal(drawn, imread(plot_run(str(tmp_path), str(tmp_path / "a.png"))))
    rows = read_rows(tmp_path / "diagnostics.nc")
    fig = draw_box(rows, "t")
    energy, dissipation, spectra = fig.axes
    assert [len(a.get_lines()) for a in (energy, dissipation)] == [2, 2]
    for line in spectra.get_lines():
        k, e = line.get_data()
        assert (k > 0).all() and e.min() >= SPECTRUM_FLOOR * e.max()


def test_round_off_is_drawn_flat_and_rings_keep_their_own_line_style():
    """A radius that moves by 1e-13 (round-off) is drawn flat in a window of 1e-6 of its
    size and labelled; no offset text; two rings with the same radii (a symmetric
    collision) get two line styles."""
    pytest.importorskip("matplotlib")
    from vortexsim.output.plot import _draw
    t = np.linspace(0.0, 1.0, 11)
    radius = 1.0020707 + 1e-13 * t
    centres = np.zeros((11, 2, 3))
    centres[:, 0, 2], centres[:, 1, 2] = 1.5 - 0.1 * t, -1.5 + 0.1 * t
    fig = _draw(t, (["upper", "lower"], centres, np.stack([radius, radius], axis=1)),
                0.125 * (1 - 1e-3 * t), {}, np.zeros((4, 3)), np.zeros((0, 3)), 1.0, "x")
    ax = fig.axes[1]
    lo, hi = ax.get_ylim()
    assert hi - lo == pytest.approx(2e-6 * radius.max())
    assert any("round-off" in text.get_text() for text in ax.texts)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(fig).draw()                       # lays out the ticks and their offset
    assert ax.yaxis.get_offset_text().get_text() == ""
    styles = [line.get_linestyle() for line in ax.get_lines()]
    assert len(set(styles)) == 2
