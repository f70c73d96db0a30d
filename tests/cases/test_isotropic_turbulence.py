"""The isotropic_turbulence case: the elements carry the initial field exactly (their
unsmoothed Biot–Savart velocity is the prescribed field), Σα = 0 and ∇·α = 0 to
round-off, a CLI run writes diagnostics and spectra with units (the turbulence
statistics of the lattice), a restart and a pickup continue bitwise, and bad parameters
are refused."""
import math

import numpy as np
import pytest

import vortexsim
from vortexsim.cases.isotropic_turbulence import isotropic_turbulence_field
from vortexsim.kernels.cutoff import gaussian_blob_transform
from vortexsim.physics.projection import divergent_fraction

L = 2.0 * math.pi
SMALL = dict(n=16, device="cpu", progress=False)


def test_the_elements_carry_the_initial_field():
    sim = vortexsim.make_case("isotropic_turbulence", **SMALL)
    n, h = 16, L / 16
    alpha = sim.elements.alpha
    scale = np.abs(alpha).sum()
    assert np.abs(alpha.sum(axis=0)).max() <= 1e-14 * scale
    assert divergent_fraction(alpha, n) <= 1e-28
    np.testing.assert_array_equal(sim.elements.volume, h ** 3)
    # u = F⁻¹[i k × ω̂ / |k|²] of the lattice vorticity α/h³ is the prescribed field
    w = np.fft.fftn((alpha / h ** 3).reshape(n, n, n, 3), axes=(0, 1, 2))
    k = np.fft.fftfreq(n, d=1.0 / n)
    kx, ky, kz = np.meshgrid(k, k, k, indexing="ij")
    k2 = np.where(kx ** 2 + ky ** 2 + kz ** 2 > 0, kx ** 2 + ky ** 2 + kz ** 2, 1.0)
    uh = 1j * np.stack([ky * w[..., 2] - kz * w[..., 1], kz * w[..., 0] - kx * w[..., 2],
                        kx * w[..., 1] - ky * w[..., 0]], axis=-1) / k2[..., None]
    u = np.fft.ifftn(uh, axes=(0, 1, 2)).real
    ref = isotropic_turbulence_field(16, 4.0, 0.5, 0)
    np.testing.assert_allclose(u, ref, atol=1e-12 * np.abs(ref).max())
    assert 0.5 * (ref ** 2).sum(axis=-1).mean() == pytest.approx(0.5, rel=1e-12)
    # the rows: the prescribed field's modes smoothed once (particle_energy) and twice
    # (mean_energy) by the case's gaussian6 blobs, σ = h, up to the lattice's aliases
    # (2.0e-4 and 5e-7 here: gaussian6's transform is larger at the aliases |k| ≈ 2π/h
    # than the Gaussian's, whose were 8e-6 and 8e-10); the lattice field's energy is the
    # field's
    d = vortexsim.make_case("isotropic_turbulence", tol=1e-10, **SMALL).diagnostics()
    e = 0.5 * (np.abs(np.fft.fftn(ref, axes=(0, 1, 2)) / n ** 3) ** 2).sum(axis=-1)
    blob = gaussian_blob_transform(0.5 * (kx ** 2 + ky ** 2 + kz ** 2) * h * h, 6)
    assert d["particle_energy"] == pytest.approx((e * blob).sum(), rel=4e-4)
    assert d["mean_energy"] == pytest.approx((e * blob ** 2).sum(), rel=2e-6)
    assert d["mean_energy"] < 0.36          # 0.341 of the field's 0.5 at n = 16 (Gaussian: 0.070)
    assert d["lattice_energy"] == pytest.approx(0.5, rel=1e-12)


def test_a_run_through_the_cli_writes_diagnostics_and_picks_up_bitwise(tmp_path):
    """Statistics rows and spectra.nc with units; the t = 0 row is the prescribed field's
    (energy 0.5, its spectrum); a CLI restart from the middle snapshot rewrites both
    files with the same rows (a branch, since later rows exist)."""
    import shutil

    import xarray as xr
    from vortexsim.cli import main
    from vortexsim.diagnostics.turbulence import energy_spectrum, flow_statistics
    out = tmp_path / "run"
    assert main(["run", "isotropic_turbulence", "--set", "n=16", "--set", "t_end=0.1",
                 "--set", "snapshot_interval=0.05", "--out", str(out), "-q"]) == 0
    ref = isotropic_turbulence_field(16, 4.0, 0.5, 0)
    stats0 = flow_statistics(ref, L, 0.02)
    with xr.open_dataset(out / "diagnostics.nc") as d, \
            xr.open_dataset(out / "spectra.nc") as s:
        assert d.sizes["t"] == 3 and s.sizes["t"] == 3
        assert d["particle_dissipation"].attrs["case_units"] == "L^2/T^3"
        assert (np.diff(d["mean_energy"].values) < 0).all()          # ν > 0: decays
        assert (np.diff(d["lattice_energy"].values) < 0).all()
        for key in ("u_rms", "re_lambda", "skewness", "flatness", "integral_scale"):
            assert d[key].attrs["units"] == "1" and d[key].values[0] == pytest.approx(
                stats0[key], rel=1e-10), key
        assert d["lattice_energy"].values[0] == pytest.approx(0.5, rel=1e-12)
        assert d["lattice_dissipation"].values[0] == pytest.approx(stats0["dissipation"],
                                                                   rel=1e-10)
        assert s["energy_spectrum"].attrs["case_units"] == "L^3/T^2"
        assert s["wavenumber"].attrs["case_units"] == "1/L"
        np.testing.assert_allclose(s["energy_spectrum"].values[0], energy_spectrum(ref, L)[1],
                                   rtol=1e-10, atol=1e-16)
        np.testing.assert_allclose(s["energy_spectrum"].sum("wavenumber").values,
                                   d["lattice_energy"].values, rtol=1e-12)   # dk = 1
        np.testing.assert_array_equal(s["t"].values, d["t"].values)
        first = s["energy_spectrum"].values.copy(), d["skewness"].values.copy()
    run_dir = tmp_path / "copy"
    shutil.copytree(out, run_dir)
    assert main(["restart", str(run_dir / "snapshot_00000001.nc"), "-q"]) == 0
    branch = run_dir / "branch_00000001"
    with xr.open_dataset(branch / "diagnostics.nc") as d, \
            xr.open_dataset(branch / "spectra.nc") as s:
        assert s["energy_spectrum"].values.tobytes() == first[0].tobytes()
        assert d["skewness"].values.tobytes() == first[1].tobytes()
    # the diagnostics file names spectra.nc: without it the run directory is refused
    (run_dir / "spectra.nc").unlink()
    assert main(["restart", str(run_dir / "snapshot_00000001.nc"), "-q"]) == 2
    a = vortexsim.make_case("isotropic_turbulence", **SMALL)
    a.run(t_end=0.1)
    saved = a.checkpoint_state()
    a.run(t_end=0.2)
    b = vortexsim.make_case("isotropic_turbulence", **SMALL)
    b.run(pickup=saved, t_end=0.2)
    assert b.elements.alpha.tobytes() == a.elements.alpha.tobytes()


@pytest.mark.parametrize("kw, match", [
    (dict(n=4), "n must be an integer >= 8"),
    (dict(energy=0.0), "energy must be a number > 0"),
    (dict(k_peak=-1.0), "k_peak"),
    (dict(seed=-1), "seed"),
])
def test_parameter_errors(kw, match):
    with pytest.raises(ValueError, match=match):
        vortexsim.make_case("isotropic_turbulence", **{**SMALL, **kw})
