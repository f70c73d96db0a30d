"""vortexsim.validation.spectral_ns (issue 16), the pseudo-spectral reference solver: Taylor–Green's
early viscous decay, a divergence-free velocity, the exact decay of a shear wave, the
velocity-field file's round trip, and the command line on a small run (CPU, a few
seconds)."""
import json
import math

import numpy as np
import pytest

from vortexsim.validation import spectral_ns as sns


def taylor_green_solver(n=16, nu=0.1):
    solver = sns.SpectralNS(n, nu)
    removed = solver.set_velocity(sns.taylor_green(n))
    assert removed["divergent_energy"] == pytest.approx(0.0, abs=1e-15)
    assert removed["truncated_energy"] == pytest.approx(0.0, abs=1e-15)
    return solver


def test_taylor_green_early_viscous_decay():
    """E₀ = 1/8 and ε₀ = 6νE₀ (physics.md, "Early viscous decay"); over each of the
    first steps to t = 0.05 the measured −ΔE/Δt equals the mean ε of the step within 1 %."""
    nu, dt = 0.1, 0.005
    solver = taylor_green_solver(nu=nu)
    assert solver.energy() == pytest.approx(0.125, rel=1e-14)
    assert solver.dissipation() == pytest.approx(6 * nu * 0.125, rel=1e-14)
    energy, eps = [solver.energy()], [solver.dissipation()]
    for _ in range(10):
        solver.step(dt)
        energy.append(solver.energy())
        eps.append(solver.dissipation())
    assert solver.t == pytest.approx(0.05, rel=1e-14)
    decay = -np.diff(energy) / dt
    eps_mean = 0.5 * (np.array(eps[1:]) + np.array(eps[:-1]))    # trapezoid over each step
    assert np.max(np.abs(decay / eps_mean - 1)) < 0.01
    # the Galerkin truncation conserves energy: the balance holds far better than 1 %
    assert np.max(np.abs(decay / eps_mean - 1)) < 1e-4


def test_velocity_stays_divergence_free(rng):
    """A random field (divergent and beyond the 2/3 cut) is projected and truncated at the
    start, and max|k·û| / max|û| stays at round-off over Taylor–Green and random steps."""
    solver = taylor_green_solver()
    for _ in range(5):
        solver.step(0.01)
    assert solver.divergence() <= 1e-12
    n = 16
    random_solver = sns.SpectralNS(n, 0.05)
    removed = random_solver.set_velocity(rng.standard_normal((3, n, n, n)))
    assert removed["divergent_energy"] > 0.1 * removed["energy"]
    assert removed["truncated_energy"] > 0.1 * removed["energy"]
    assert random_solver.divergence() <= 1e-12
    for _ in range(3):
        random_solver.step(0.01)
    assert random_solver.divergence() <= 1e-12
    assert np.isfinite(random_solver.energy())


def test_shear_wave_decays_exactly():
    """u = (sin y, 0, 0): the nonlinear term is a gradient (projected away), and the
    integrating factor is exact: E(T) = E₀ e^{−2νT} to 1e-8 (also under several steps and
    a last, shortened one), and the shape stays the shear wave."""
    n, nu, t_end = 16, 0.1, 0.53
    solver = sns.SpectralNS(n, nu)
    solver.set_velocity(sns.shear_wave(n))
    e0 = solver.energy()
    assert e0 == pytest.approx(0.25, rel=1e-14)
    result = sns.run(solver, t_end, dt=0.05, every=3, progress=False)
    assert result["error"] is None and solver.t == t_end
    assert solver.energy() == pytest.approx(e0 * math.exp(-2 * nu * t_end), rel=1e-8)
    u = solver.velocity()
    assert np.allclose(u, math.exp(-nu * t_end) * sns.shear_wave(n), rtol=0, atol=1e-13)


def test_velocity_field_round_trip(tmp_path):
    """write → read gives back the field, box and time exactly; the (component, x, y, z)
    variant and transposed dims read the same; a wrong lattice or no velocity is an error."""
    n, box = 8, 3.0
    u = sns.taylor_green(n, box)
    u[2] = np.random.default_rng(1).standard_normal((n, n, n))   # no symmetry to hide a flip
    path = tmp_path / "field.nc"
    sns.write_velocity_field(path, u, box, t=1.25)
    back, box_back, t_back, attrs = sns.read_velocity_field(path)
    assert np.array_equal(back, u) and back.dtype == np.float64
    assert (box_back, t_back) == (box, 1.25)
    assert attrs["format"] == sns.FIELD_FORMAT
    with pytest.raises(FileExistsError):
        sns.write_velocity_field(path, u, box)

    import xarray as xr
    x = sns.lattice(n, box)
    alt = xr.Dataset({"velocity": (("component", "z", "y", "x"), u.transpose(0, 3, 2, 1))},
                     coords={"x": x, "y": x, "z": x})                # no box attribute
    alt.to_netcdf(tmp_path / "alt.nc", engine="netcdf4")
    back, box_back, _, _ = sns.read_velocity_field(tmp_path / "alt.nc")
    assert np.array_equal(back, u) and box_back == pytest.approx(box, rel=1e-15)

    shifted = alt.assign_coords(x=x + 0.5 * box / n)
    shifted.attrs["box"] = box
    shifted.to_netcdf(tmp_path / "shifted.nc", engine="netcdf4")
    with pytest.raises(ValueError, match="not the lattice"):
        sns.read_velocity_field(tmp_path / "shifted.nc")
    xr.Dataset({"p": (("x", "y", "z"), u[0])}).to_netcdf(tmp_path / "none.nc")
    with pytest.raises(ValueError, match="expected u, v, w"):
        sns.read_velocity_field(tmp_path / "none.nc")


def test_command_line_run_from_a_file(tmp_path):
    """The CLI from a Taylor–Green file (n from the file): rows, spectra with
    Σ E(k) Δk = E, the JSON summary and the final field, which runs on from where it was."""
    import xarray as xr
    field = tmp_path / "tg.nc"
    sns.write_velocity_field(field, sns.taylor_green(16), 2 * math.pi)
    out, final = tmp_path / "run.json", tmp_path / "final.nc"
    rc = sns.main(["--init", str(field), "--nu", "1/10", "--t-end", "0.05", "--cfl", "0.5",
                   "--dt", "0.01", "--every", "2", "--spectrum-times", "0,0.03,0.05",
                   "--out", str(out), "--save-field", str(final), "--quiet"])
    assert rc == 0
    summary = json.loads(out.read_text())
    assert summary["n"] == 16 and summary["nu"] == 0.1 and summary["t_final"] == 0.05
    assert summary["error"] is None and summary["ms_per_step"] > 0
    assert summary["divergence_final"] <= 1e-12
    with xr.open_dataset(summary["netcdf"]) as ds:
        assert list(ds.spectrum_time.values) == [0.0, 0.03, 0.05]
        dk = float(ds.wavenumber[1] - ds.wavenumber[0])
        total = ds.energy_spectrum.sum("wavenumber").values * dk
        assert np.allclose(total, ds.energy.sel(time=ds.spectrum_time).values, rtol=1e-13)
        assert ds.energy.attrs["units"] == "L^2/T^2"
        assert float(ds.energy[0]) == pytest.approx(0.125, rel=1e-14)
    u, box, t, _ = sns.read_velocity_field(final)
    assert t == 0.05 and box == pytest.approx(2 * math.pi, rel=1e-15)
    solver = sns.SpectralNS(16, 0.1)
    solver.set_velocity(u)
    assert solver.energy() == pytest.approx(summary["energy_final"], rel=1e-13)


def test_parse_number():
    assert sns.parse_number("1/1600") == 1 / 1600
    assert sns.parse_number("6.25e-4") == 6.25e-4
    assert sns.parse_number("2pi") == 2 * math.pi
    assert sns.parse_number("pi/2") == math.pi / 2
    with pytest.raises(Exception):
        sns.parse_number("two")


def test_statistics_rows(tmp_path):
    """--statistics adds the turbulence statistics of vortexsim.diagnostics.turbulence.flow_statistics
    to every row, with units (at t = 0 those of the initial field); without it the file
    has none of them."""
    import xarray as xr
    from vortexsim.diagnostics.random_field import random_solenoidal_field
    from vortexsim.diagnostics.turbulence import flow_statistics
    n, nu = 16, 0.05
    u0 = np.moveaxis(random_solenoidal_field(n, 2 * math.pi, k_peak=3.0, energy=0.5, seed=2),
                     -1, 0)
    field = tmp_path / "hit.nc"
    sns.write_velocity_field(field, u0, 2 * math.pi)
    common = ["--init", str(field), "--nu", str(nu), "--t-end", "0.04", "--dt", "0.01",
              "--every", "2", "--quiet"]
    assert sns.main(common + ["--statistics", "--out", str(tmp_path / "s.json")]) == 0
    assert sns.main(common + ["--out", str(tmp_path / "plain.json")]) == 0
    expected = flow_statistics(np.moveaxis(u0, 0, -1), 2 * math.pi, nu)
    with xr.open_dataset(tmp_path / "s.nc") as ds:
        assert ds.sizes["time"] == 3
        for key, (units, _) in sns.STATISTICS.items():
            assert ds[key].attrs["units"] == units and ds[key].attrs["long_name"]
            assert float(ds[key][0]) == pytest.approx(expected[key], rel=1e-12)
            assert np.isfinite(ds[key].values).all()
        assert float(ds.energy[0]) == pytest.approx(expected["energy"], rel=1e-12)
    with xr.open_dataset(tmp_path / "plain.nc") as ds:
        assert not set(sns.STATISTICS) & set(ds.data_vars)
