"""The isotropic_turbulence case: the elements carry the initial field exactly (their
unsmoothed Biot–Savart velocity is the prescribed field), Σα = 0 and ∇·α = 0 to
round-off, a CLI run writes diagnostics with units, a pickup continues bitwise, and bad
parameters are refused."""
import math

import numpy as np
import pytest

import vortexsim
from vortexsim.cases.isotropic_turbulence import isotropic_turbulence_field
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
    # (mean_energy) by the blobs, σ = h, up to the lattice's aliases (8e-6 and 8e-10 here)
    d = vortexsim.make_case("isotropic_turbulence", tol=1e-10, **SMALL).diagnostics()
    e = 0.5 * (np.abs(np.fft.fftn(ref, axes=(0, 1, 2)) / n ** 3) ** 2).sum(axis=-1)
    k2 = kx ** 2 + ky ** 2 + kz ** 2
    assert d["particle_energy"] == pytest.approx((e * np.exp(-0.5 * k2 * h * h)).sum(),
                                                 rel=3e-5)
    assert d["mean_energy"] == pytest.approx((e * np.exp(-k2 * h * h)).sum(), rel=1e-8)
    assert d["mean_energy"] < 0.15                  # 0.070 of the field's 0.5 at n = 16


def test_a_run_through_the_cli_writes_diagnostics_and_picks_up_bitwise(tmp_path):
    import xarray as xr
    from vortexsim.cli import main
    out = tmp_path / "run"
    assert main(["run", "isotropic_turbulence", "--set", "n=16", "--set", "t_end=0.1",
                 "--out", str(out), "-q"]) == 0
    with xr.open_dataset(out / "diagnostics.nc") as d:
        assert d.sizes["time"] == 3
        assert d["particle_dissipation"].attrs["units"] == "L^2/T^3"
        assert (np.diff(d["mean_energy"].values) < 0).all()          # ν > 0: decays
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
