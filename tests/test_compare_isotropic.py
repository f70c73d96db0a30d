"""vortexsim.validation.compare_isotropic (issue 17) on small synthetic files in vortexsim's
layout (RUN/diagnostics.nc, RUN/spectra.nc, RUN/config.toml) and spectral_ns.py's
(``--nc``): identical data gives zero differences, a 2 % offset gives 2 %, times without
a vortexsim row are interpolated and marked, shells beyond k_max/2 do not count, and a
missing file or variable is one line with exit code 2."""
import math
import os

import numpy as np
import pytest
import xarray as xr

from vortexsim.validation import compare_isotropic as ci

N = 24                                     # k_max = 8: the E(k) range is 1 <= k <= 4
T_ROWS = np.round(np.arange(0, 11) * 0.1, 12)
K = np.arange(13, dtype=float)


def series(t):
    """Smooth rows: E, ε = −dE/dt of E = 0.5 e^{−t}, and statistics."""
    t = np.asarray(t, float)
    return dict(energy=0.5 * np.exp(-t), dissipation=0.5 * np.exp(-t),
                re_lambda=50 - 5 * t, skewness=-0.4 - 0.01 * t, flatness=4.0 + 0.1 * t)


def spectrum(t):
    return np.outer(np.exp(-np.asarray(t, float)), K ** 4 * np.exp(-2 * (K / 4) ** 2))


def write_run(run_dir, t=T_ROWS, spectrum_t=(0.0, 0.5, 1.0), factor=1.0, drop=()):
    os.makedirs(run_dir, exist_ok=True)
    rows = series(t)
    names = {"energy": "lattice_energy", "dissipation": "lattice_dissipation"}
    data = {names.get(k, k): ("time", factor * v if k in names else v, {"units": "1"})
            for k, v in rows.items()}
    for k in drop:
        data.pop(k)
    xr.Dataset(data, coords={"time": ("time", np.asarray(t, float))}).to_netcdf(
        os.path.join(run_dir, "diagnostics.nc"))
    e = factor * spectrum(spectrum_t)
    e[:, 6] *= 3.0                         # beyond k_max/2 = 4: must not count
    xr.Dataset({"energy_spectrum": (("time", "wavenumber"), e)},
               coords={"time": ("time", np.asarray(spectrum_t, float)),
                       "wavenumber": ("wavenumber", K)}).to_netcdf(
        os.path.join(run_dir, "spectra.nc"))
    with open(os.path.join(run_dir, "config.toml"), "w") as fh:
        fh.write(f'case = "isotropic_turbulence"\n[physics]\nn = {N}\nnu = 0.01\n')
    return run_dir


def write_spectral(path, t=T_ROWS, spectrum_t=(0.0, 0.5, 1.0), statistics=True):
    rows = series(t)
    data = {k: ("time", v, {"units": "1"}) for k, v in rows.items()
            if statistics or k in ("energy", "dissipation")}
    data["energy_spectrum"] = (("spectrum_time", "wavenumber"), spectrum(spectrum_t))
    ds = xr.Dataset(data, coords={"time": ("time", np.asarray(t, float)),
                                  "spectrum_time": ("spectrum_time", np.asarray(spectrum_t)),
                                  "wavenumber": ("wavenumber", K)})
    ds.attrs.update(n=N, nu=0.01, box=2 * math.pi)
    ds.to_netcdf(path)
    return path


def compare(run_dir, spectral_path, times=(0.5, 1.0)):
    vs, sp = ci.load_vortexsim(run_dir), ci.load_spectral(spectral_path)
    rows = ci.compare_rows(vs, sp)
    k_max = ci.k_max_of(sp, vs)
    spectra, missing = ci.compare_spectra(vs, sp, list(times), k_max)
    return rows, k_max, spectra, missing


def test_identical_data_gives_zero_differences(tmp_path, capsys):
    run = write_run(str(tmp_path / "run"))
    spectral = write_spectral(str(tmp_path / "sp.nc"))
    rows, k_max, spectra, missing = compare(run, spectral)
    assert k_max == pytest.approx(8.0, rel=1e-15)
    assert len(rows["t"]) == 11 and not rows["interpolated"].any()
    assert rows["max_rel_energy"] == 0 and rows["max_rel_dissipation"] == 0
    np.testing.assert_array_equal(rows["minus_dEdt_v"], rows["minus_dEdt_s"])
    np.testing.assert_allclose(rows["minus_dEdt_v"], rows["dissipation_v"], rtol=5e-3)
    for s in ci.STATISTICS:
        np.testing.assert_array_equal(rows[f"{s}_v"], rows[f"{s}_s"])
    assert [r["t"] for r in spectra] == [0.5, 1.0] and not missing
    assert all(r["max_rel"] == 0 for r in spectra)
    np.testing.assert_array_equal(spectra[0]["k_range"], [1.0, 2.0, 3.0, 4.0])

    png = tmp_path / "spectra.png"
    assert ci.main([run, spectral, "--spectrum-times", "0.5,1", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "max |rel diff| over the 11 common times: E 0.000 %, eps 0.000 %" in out
    assert "t = 1: max |E_v(k)/E_s(k) - 1| = 0.00 % over 4 shells" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_two_percent_offset_gives_two_percent(tmp_path, capsys):
    run = write_run(str(tmp_path / "run"), factor=1.02)
    spectral = write_spectral(str(tmp_path / "sp.nc"))
    rows, _, spectra, _ = compare(run, spectral)
    np.testing.assert_allclose(rows["rel_energy"], 0.02, rtol=1e-12)
    np.testing.assert_allclose(rows["rel_dissipation"], 0.02, rtol=1e-12)
    assert rows["max_rel_energy"] == pytest.approx(0.02, rel=1e-12)
    assert rows["max_rel_dissipation"] == pytest.approx(0.02, rel=1e-12)
    assert [r["max_rel"] for r in spectra] == pytest.approx([0.02, 0.02], rel=1e-12)
    np.testing.assert_allclose(rows["minus_dEdt_v"], 1.02 * rows["minus_dEdt_s"], rtol=1e-12)
    assert ci.main([run, spectral]) == 0
    out = capsys.readouterr().out
    assert "E 2.000 %, eps 2.000 %" in out and "+2.000 %" in out


def test_times_without_a_vortexsim_row_are_interpolated(tmp_path, capsys):
    """Spectral rows at 0.05, 0.15, ... between vortexsim's: linear interpolation in time
    (exact for a linear series, marked *); times outside vortexsim's range are left out;
    spectra are not interpolated."""
    run = write_run(str(tmp_path / "run"), t=T_ROWS[:6])            # 0 .. 0.5
    t_s = np.round(np.arange(0, 21) * 0.05, 12)                      # 0 .. 1
    spectral = write_spectral(str(tmp_path / "sp.nc"), t=t_s, spectrum_t=(0.0, 0.25),
                              statistics=False)
    vs, sp = ci.load_vortexsim(run), ci.load_spectral(spectral)
    rows = ci.compare_rows(vs, sp)
    np.testing.assert_allclose(rows["t"], t_s[:11])
    assert list(rows["interpolated"]) == [i % 2 == 1 for i in range(11)]
    np.testing.assert_allclose(rows["re_lambda_v"], series(rows["t"])["re_lambda"], rtol=1e-14)
    assert np.isnan(rows["re_lambda_s"]).all() and not sp["has_statistics"]
    assert rows["max_rel_energy"] < 2e-3            # e^{-t} interpolated: h²/8 = 1.25e-3
    spectra, missing = ci.compare_spectra(vs, sp, [0.0, 0.25], ci.k_max_of(sp, vs))
    assert [r["t"] for r in spectra] == [0.0] and missing[0][0] == 0.25
    assert ci.main([run, spectral]) == 0
    out = capsys.readouterr().out
    assert "| 0.05* |" in out and "5 of 11 times" in out and "--statistics" in out
    assert "no spectrum of vortexsim at t = 0.25: not compared" in out


@pytest.mark.parametrize("what, match", [
    ("no_run", "is not a directory"),
    ("no_spectral", "does not exist (the --nc file of spectral_ns.py)"),
    ("no_spectra_nc", "spectra.nc does not exist"),
    ("no_variable", "has no variable 'lattice_dissipation'"),
    ("no_spectrum", "has no variable 'spectrum_time'"),
    ("disjoint", "no common time"),
])
def test_missing_files_and_variables(tmp_path, capsys, what, match):
    run, spectral = str(tmp_path / "run"), str(tmp_path / "sp.nc")
    if what != "no_run":
        write_run(run, drop=("lattice_dissipation",) if what == "no_variable" else (),
                  t=T_ROWS + 5 if what == "disjoint" else T_ROWS)
    if what == "no_spectra_nc":
        os.remove(os.path.join(run, "spectra.nc"))
    if what != "no_spectral":
        write_spectral(spectral)
    if what == "no_spectrum":
        with xr.open_dataset(spectral) as ds:
            ds = ds.drop_vars(["energy_spectrum", "spectrum_time"]).load()
        ds.to_netcdf(spectral)
    with pytest.raises(SystemExit) as info:
        ci.main([run, spectral])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert match in err and err.startswith("compare_isotropic: error: ")
    assert err.count("\n") == 1
