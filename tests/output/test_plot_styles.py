"""The drawing rules that the plots share (vortexsim/output/plot.py, plot_box.py): curves
that coincide all show, a panel that does not vary is drawn flat and says so, spectra
without their round-off tail, dissipation curves explained, and the case's units in the
labels of xarray's own plots of the diagnostics."""
from __future__ import annotations

import numpy as np
import pytest

from vortexsim.output.plot import FLAT, ROUND_OFF, curve_style, flat_if_constant
from vortexsim.output.plot_box import SPECTRUM_FLOOR, dissipation_curves, resolved_spectrum

pytest.importorskip("matplotlib")


def _axes():
    from matplotlib.figure import Figure

    return Figure().subplots()


@pytest.mark.parametrize("n", [2, 3, 5])
def test_curves_of_the_same_plot_have_different_dashes_and_markers(n):
    styles = [curve_style(i, n, 40) for i in range(n)]
    assert len({str(s["linestyle"]) for s in styles}) == n
    assert len({s["marker"] for s in styles}) == n
    # the first is widest and lowest: what lies under the others shows beside them
    widths = [s["linewidth"] for s in styles]
    assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1]
    assert [s["zorder"] for s in styles] == sorted(s["zorder"] for s in styles)
    # markers of coinciding curves are staggered along them
    assert len({s["markevery"][0] for s in styles}) == n


@pytest.mark.parametrize("centre, scale, spread, word, text", [
    (0.0, 6.1, 3e-17, "conserved", "conserved to < 1e-16 (round-off)"),  # a ring's helicity
    (0.0, 6.1, 3e-14, "conserved", "conserved to 3e-14 (round-off)"),
    (1.002, None, 2e-8, "constant", "constant to 2e-08"),                # its radius
])
def test_a_curve_that_does_not_vary_is_drawn_flat_and_says_how_flat(centre, scale, spread,
                                                                    word, text):
    t = np.linspace(0.0, np.pi / 2, 51)
    size = scale or centre
    values = centre + spread * size * np.sin(t)          # range: spread × size
    ax = _axes()
    ax.plot(t, values)
    relative = flat_if_constant(ax, values, scale=scale, word=word)
    assert relative == pytest.approx(spread, rel=0.05)
    assert [x.get_text() for x in ax.texts] == [text]
    lo, hi = ax.get_ylim()
    # a window of ±1000 × the range (at least ±1e-6 of the size) around the curve: the
    # variation spans under a pixel
    assert (lo + hi) / 2 == pytest.approx(centre, abs=1e-6 * size)
    assert hi - lo == pytest.approx(2 * max(1e-6, 1e3 * relative) * size, rel=1e-6)
    assert hi - lo >= 1.9e3 * np.ptp(values)
    assert not ax.yaxis.get_major_formatter().get_useOffset()


def test_a_curve_that_varies_keeps_its_axis_and_gets_no_note():
    t = np.linspace(0.0, 5.0, 50)
    values = 1.0 + 10 * FLAT * np.sin(t)
    ax = _axes()
    ax.plot(t, values)
    assert flat_if_constant(ax, values) is None
    assert not ax.texts
    lo, hi = ax.get_ylim()
    assert hi - lo < 1e-4                      # autoscaled onto the curve
    assert not ax.yaxis.get_major_formatter().get_useOffset()


def test_curves_far_apart_keep_their_window_but_get_the_note():
    """An impulse (0, ~1e-17, 3.14 ± 1e-8): each component flat, not one window."""
    t = np.linspace(0.0, 1.0, 20)
    p = np.column_stack([1e-17 * np.cos(t), np.zeros_like(t), 3.14 + 3e-8 * t])
    ax = _axes()
    for c in range(3):
        ax.plot(t, p[:, c])
    assert flat_if_constant(ax, p, scale=3.14, word="conserved") == pytest.approx(
        3e-8 / 3.14)
    assert [x.get_text() for x in ax.texts] == ["conserved to 1e-08"]
    lo, hi = ax.get_ylim()
    assert lo < 0.0 and hi > 3.14
    assert ROUND_OFF < 1e-8 < FLAT


def test_the_ring_plot_draws_a_radius_constant_to_5e_8_flat():
    """The run's plot.png (single_ring's radius varies by 5e-8 from the time stepping)."""
    from vortexsim.output.plot import _draw

    t = np.linspace(0.0, 5.0, 30)
    radii = (1.00207 - 4.6e-8 * t / 5.0)[:, None]
    centres = np.zeros((t.size, 1, 3))
    centres[:, 0, 2] = 0.24 * t
    points = np.random.default_rng(0).normal(size=(64, 3))
    fig = _draw(t, (["ring"], centres, radii), 0.8 * (1 + 1e-4 * np.sin(t)), {}, points,
                points, 5.0, "test")
    texts = [x.get_text() for x in fig.axes[1].texts]
    assert texts == ["constant to 5e-08"]
    lo, hi = fig.axes[1].get_ylim()
    assert hi - lo > 1e3 * 4.6e-8               # the range: under a thousandth of it
    # the energy change (1e-4) is a curve: no note on the twin axis
    assert not [x for a in fig.axes for x in a.texts if x.get_text().startswith("E to")]


def test_a_spectrum_is_drawn_without_its_round_off_tail():
    k = np.arange(0.0, 20.0)
    e = np.concatenate([[0.0], k[1:9] ** -2.0, [1e-20, 1e-35, 0.0, 3e-30], np.zeros(7)])
    kk, ee = resolved_spectrum(k, e)
    np.testing.assert_array_equal(kk, k[1:9])
    np.testing.assert_array_equal(ee, e[1:9])
    assert ee.min() > SPECTRUM_FLOOR * ee.max()
    assert resolved_spectrum(k, np.zeros_like(k))[0].size == 0


def _periodic(t, gap=1.0):
    """Columns of a periodic run whose lattice energy falls at the rate ``gap`` × ε and
    whose particle energy falls at exactly its viscous loss."""
    energy = 0.5 * np.exp(-t)
    return {"lattice_energy": energy, "lattice_dissipation": energy / gap,
            "particle_energy": 0.8 * energy, "particle_dissipation": 0.8 * energy,
            "mean_energy": 0.7 * energy, "dissipation": 0.7 * energy}


def test_the_dissipation_curves_say_what_each_is():
    t = np.linspace(0.0, 1.0, 41)
    curves, note = dissipation_curves(t, _periodic(t))
    labels = [label for _, label, _ in curves]
    assert labels[0].startswith("ε = ") and "lattice" in labels[0]
    assert labels[1].startswith("−dE/dt from the energy rows")
    assert labels[2].startswith("ν⟨ω_p·ω⟩") and labels[3].startswith("−dE_p/dt")
    assert len({style for _, _, style in curves}) == 4
    np.testing.assert_allclose(curves[1][0], curves[0][0], rtol=3e-2)   # -dE/dt = ε
    assert note == ""
    # ε a third below what the lattice energy loses: the note says why they differ
    _, note = dissipation_curves(t, _periodic(t, gap=1.5))
    assert note.startswith("mean −dE/dt 50% above mean ε") and "E_p" in note
    # without a lattice: the blob velocity's pair, the particles' beside it
    columns = {k: v for k, v in _periodic(t).items() if not k.startswith("lattice")}
    labels = [label for _, label, _ in dissipation_curves(t, columns)[0]]
    assert "blob velocity" in labels[0] and len(labels) == 4


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from vortexsim.cli import main

    out = tmp_path_factory.mktemp("styles") / "ring"
    assert main(["run", "single_ring", "--set", "n_phi=6", "--set", "layers=1", "--set",
                 "tracers_per_ring=6", "--set", "plot=false", "--set", "t_end=0.05",
                 "--device", "cpu", "-q", "--out", str(out)]) == 0
    return out


def test_xarray_plots_of_the_diagnostics_show_the_case_units(tiny_run):
    """xarray labels an axis ``long_name [units]``; units is CF's "1", the case's unit
    is at the end of long_name."""
    import matplotlib
    import xarray as xr

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with xr.open_dataset(tiny_run / "diagnostics.nc") as ds:
        assert ds["energy"].attrs["units"] == "1"
        assert ds["energy"].attrs["case_units"] == "L^5/T^2"
        fig = plt.figure()
        try:
            ds["energy"].plot()
            ylabel = fig.axes[0].get_ylabel().replace("\n", " ")
            xlabel = fig.axes[0].get_xlabel().replace("\n", " ")
        finally:
            plt.close(fig)
        assert "L^5/T^2" in ylabel and "energy" in ylabel
        assert "in T" in xlabel
        # pure numbers keep their plain long_name
        assert ds["iteration"].attrs["long_name"] == "number of completed time steps"
        assert ds["ring_radius"].attrs["long_name"].endswith(", in L")


def test_the_case_unit_ends_the_long_name_and_info_shows_it_once():
    """variable_attrs puts the case's unit at the end of long_name (xarray's labels);
    bare_long_name takes it off again for text that shows the unit apart (info)."""
    from vortexsim.output.cf import bare_long_name, variable_attrs
    attrs = variable_attrs("L^5/T^2", "kinetic energy")
    assert attrs["long_name"] == "kinetic energy, in L^5/T^2" and attrs["units"] == "1"
    assert bare_long_name(attrs) == "kinetic energy"
    number = variable_attrs("1", "skewness")
    assert number == {"units": "1", "long_name": "skewness"}
    assert bare_long_name(number) == "skewness"
    assert bare_long_name({"long_name": "old file, in L", "units": "L"}) == "old file, in L"
