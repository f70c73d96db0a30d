"""The initial field of isotropic_turbulence as a file (issue 17): a fresh ``vortexsim run``
writes ``initial_field.nc``, bitwise the case's field with its parameters as attributes;
spectral_ns.py's reader takes it and its solver starts from it unchanged (nothing
divergent, nothing beyond the 2/3 cut); a restart leaves it alone and ``--overwrite``
writes the new run's."""
import math
import os

import numpy as np
import pytest

import vortexsim
from vortexsim.cases.isotropic_turbulence import isotropic_turbulence_field
from vortexsim.cli import main
from vortexsim.output.lattice_field import read_velocity_field

@pytest.fixture(scope="module")
def sns():
    from vortexsim.validation import spectral_ns
    return spectral_ns


def test_a_cli_run_writes_the_initial_field(tmp_path, sns):
    out = tmp_path / "run"
    assert main(["run", "isotropic_turbulence", "--set", "n=16", "--set", "t_end=0.05",
                 "--set", "seed=3", "--set", "k_peak=3", "--set", "nu=0.03",
                 "--out", str(out), "-q"]) == 0
    path = out / "initial_field.nc"
    ref = np.moveaxis(isotropic_turbulence_field(16, 3.0, 0.5, 3), -1, 0)
    u, box, t, attrs = read_velocity_field(path)
    assert np.array_equal(u, ref) and box == 2 * math.pi and t == 0.0
    assert {k: attrs[k] for k in ("case", "n", "k_peak", "energy", "seed", "nu")} == dict(
        case="isotropic_turbulence", n=16, k_peak=3.0, energy=0.5, seed=3, nu=0.03)
    assert attrs["source"].startswith("vortexsim ") and "vortexsim run" in attrs["history"]

    # spectral_ns.py reads it and starts from exactly this field
    u_s, box_s, t_s, _ = sns.read_velocity_field(str(path))
    assert np.array_equal(u_s, ref) and (box_s, t_s) == (box, 0.0)
    solver = sns.SpectralNS(16, 0.03, box_s)
    removed = solver.set_velocity(u_s)
    assert removed["divergent_energy"] <= 1e-28 and removed["truncated_energy"] <= 1e-28
    assert removed["energy"] == pytest.approx(0.5, rel=1e-12)
    np.testing.assert_allclose(solver.velocity(), ref, rtol=0, atol=1e-14)

    # a restart does not rewrite it
    stat = os.stat(path)
    data = path.read_bytes()
    snapshot = sorted(out.glob("snapshot_*.nc"))[-1]
    assert main(["restart", str(snapshot), "--t-end", "0.1", "-q"]) == 0
    assert path.read_bytes() == data and os.stat(path).st_mtime_ns == stat.st_mtime_ns

    # --overwrite is a fresh run: the file is the new run's
    assert main(["run", "isotropic_turbulence", "--set", "n=16", "--set", "t_end=0.05",
                 "--set", "seed=4", "--out", str(out), "--overwrite", "-q"]) == 0
    u, _, _, attrs = read_velocity_field(path)
    assert attrs["seed"] == 4 and attrs["nu"] == 0.02
    assert np.array_equal(u, np.moveaxis(isotropic_turbulence_field(16, 4.0, 0.5, 4), -1, 0))


def test_make_case_hands_the_file_on(tmp_path):
    """The writer holds the builder's own field (not made twice), writes it bitwise and
    lets it go; a config with other parameters gets its own field."""
    sim = vortexsim.make_case("isotropic_turbulence", n=16, progress=False)
    assert list(sim.case_files) == ["initial_field.nc"]
    write = sim.case_files["initial_field.nc"]
    assert write.u is not None
    write(tmp_path / "a.nc", sim.config)
    assert write.u is None
    u, *_ = read_velocity_field(tmp_path / "a.nc")
    assert np.array_equal(u, np.moveaxis(isotropic_turbulence_field(16, 4.0, 0.5, 0), -1, 0))
    other = vortexsim.make_case("isotropic_turbulence", n=16, progress=False)
    other.case_files["initial_field.nc"](tmp_path / "b.nc", {**other.config, "seed": 5})
    u, *_ = read_velocity_field(tmp_path / "b.nc")
    assert np.array_equal(u, np.moveaxis(isotropic_turbulence_field(16, 4.0, 0.5, 5), -1, 0))
    assert vortexsim.make_case("single_ring", progress=False).case_files == {}
