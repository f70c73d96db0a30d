"""vortexsim/output/lattice_field.py: the velocity-field file of the periodic box (issue 17)
round-trips exactly with its attributes and units, reads the other layouts and the files
spectral_ns.py wrote before, refuses bad input with one-line errors, and writes
atomically (no temporary file left, an old file kept when a write fails)."""
import glob
import math
import os

import numpy as np
import pytest
import xarray as xr

from vortexsim.output.lattice_field import (FIELD_FORMAT, FIELD_FORMAT_VERSION, lattice,
                                            read_velocity_field, write_velocity_field)

N, BOX = 8, 3.0


@pytest.fixture
def field():
    return np.random.default_rng(7).standard_normal((3, N, N, N))


def test_round_trip_with_attributes_and_units(tmp_path, field):
    path = tmp_path / "field.nc"
    params = dict(case="isotropic_turbulence", n=N, k_peak=4.0, energy=0.5, seed=3, nu=0.01,
                  flag=True, none=None)
    assert write_velocity_field(path, field, BOX, t=1.25, title="a field", attrs=params) == path
    u, box, t, attrs = read_velocity_field(path)
    assert np.array_equal(u, field) and u.dtype == np.float64 and u.flags.c_contiguous
    assert (box, t) == (BOX, 1.25)
    assert attrs["Conventions"] == "CF-1.10" and attrs["title"] == "a field"
    assert attrs["format"] == FIELD_FORMAT and attrs["format_version"] == FIELD_FORMAT_VERSION
    assert (attrs["n"], attrs["seed"], attrs["nu"], attrs["case"]) == (N, 3, 0.01,
                                                                        "isotropic_turbulence")
    assert attrs["flag"] == 1 and attrs["none"] == "none"
    with xr.open_dataset(path) as ds:
        assert list(ds.data_vars) == ["u", "v", "w"]
        for name in [*ds.data_vars, *ds.coords]:
            assert ds[name].attrs["units"] == "1" and ds[name].attrs["long_name"]
            assert ds[name].attrs["case_units"] == ("L/T" if name in "uvw" else "L")
            assert ds[name].dims == (("x", "y", "z") if name in "uvw" else (name,))
        np.testing.assert_array_equal(ds.x.values, lattice(N, BOX))
    # the same box given explicitly is fine; a different one is an error
    assert read_velocity_field(path, box=BOX)[1] == BOX
    with pytest.raises(ValueError, match="has box = 3.0; asked for 2.0"):
        read_velocity_field(path, box=2.0)


def test_other_layouts_and_files_written_before(tmp_path, field):
    """(component, x, y, z) in any order, no box attribute (n × the spacing), and the
    layout spectral_ns.py wrote before (no Conventions) read the same."""
    x = lattice(N, BOX)
    alt = xr.Dataset({"velocity": (("component", "z", "y", "x"), field.transpose(0, 3, 2, 1))},
                     coords={"x": x, "y": x, "z": x})
    alt.to_netcdf(tmp_path / "alt.nc", engine="netcdf4")
    u, box, t, _ = read_velocity_field(tmp_path / "alt.nc")
    assert np.array_equal(u, field) and box == pytest.approx(BOX, rel=1e-15) and t == 0.0
    old = xr.Dataset({c: (("x", "y", "z"), field[i]) for i, c in enumerate("uvw")},
                     coords={"x": x, "y": x, "z": x})
    old.attrs.update(format=FIELD_FORMAT, format_version=1, box=BOX, time=0.5, title="old",
                     units_note="L (length), T (time): the flow's units")
    old.to_netcdf(tmp_path / "old.nc", engine="netcdf4")
    u, box, t, attrs = read_velocity_field(tmp_path / "old.nc")
    assert np.array_equal(u, field) and (box, t) == (BOX, 0.5) and "Conventions" not in attrs
    # no coordinates and no box attribute: the caller's box
    xr.Dataset({c: (("x", "y", "z"), field[i]) for i, c in enumerate("uvw")}).to_netcdf(
        tmp_path / "bare.nc")
    assert read_velocity_field(tmp_path / "bare.nc", box=2.0)[1] == 2.0
    with pytest.raises(ValueError, match="no box attribute and no x coordinate"):
        read_velocity_field(tmp_path / "bare.nc")


def _dataset(field, **attrs):
    ds = xr.Dataset({c: (("x", "y", "z"), field[i]) for i, c in enumerate("uvw")})
    ds.attrs.update(attrs)
    return ds


@pytest.mark.parametrize("make, error, match", [
    (lambda f, p: None, FileNotFoundError, "does not exist"),
    (lambda f, p: p.write_text("not netCDF"), ValueError, "not a readable netCDF file"),
    (lambda f, p: xr.Dataset({"p": (("x", "y", "z"), f[0])}).to_netcdf(p), ValueError,
     "expected u, v, w"),
    (lambda f, p: xr.Dataset({c: (("x", "y", "t"), f[i]) for i, c in enumerate("uvw")})
     .to_netcdf(p), ValueError, r"variable u has dims \('x', 'y', 't'\)"),
    (lambda f, p: xr.Dataset({"velocity": (("component", "x", "y", "z"), f[:2])}).to_netcdf(p),
     ValueError, "expected \\(component: 3, x, y, z\\)"),
    (lambda f, p: xr.Dataset({c: (("x", "y", "z"), f[i, :, :, :4])
                              for i, c in enumerate("uvw")}).to_netcdf(p),
     ValueError, "expected n³"),
    (lambda f, p: _dataset(np.where(f > 2, np.nan, f), box=BOX).to_netcdf(p), ValueError,
     "non-finite"),
    (lambda f, p: _dataset(f, box="big").to_netcdf(p), ValueError,
     "attribute box is 'big'; expected a number"),
    (lambda f, p: _dataset(f, box=-1.0).to_netcdf(p), ValueError, "expected a period > 0"),
    (lambda f, p: _dataset(f, box=BOX, time=math.inf).to_netcdf(p), ValueError,
     "attribute time is inf"),
    (lambda f, p: _dataset(f, box=BOX).assign_coords(x=lattice(N, BOX) + 0.1).to_netcdf(p),
     ValueError, "coordinate x is not the lattice"),
])
def test_read_errors_are_one_line(tmp_path, field, make, error, match):
    path = tmp_path / "bad.nc"
    make(field, path)
    with pytest.raises(error, match=match) as info:
        read_velocity_field(path)
    assert "\n" not in str(info.value)


def test_write_errors(tmp_path, field):
    path = tmp_path / "f.nc"
    with pytest.raises(ValueError, match=r"expected \(3, n, n, n\)"):
        write_velocity_field(path, np.moveaxis(field, 0, -1), BOX)
    with pytest.raises(ValueError, match="non-finite"):
        write_velocity_field(path, np.where(field > 2, np.inf, field), BOX)
    with pytest.raises(ValueError, match="box is 0"):
        write_velocity_field(path, field, 0)
    with pytest.raises(ValueError, match="set by the file format"):
        write_velocity_field(path, field, BOX, attrs={"box": 1.0})
    with pytest.raises(TypeError, match="attribute 'd' is a dict"):
        write_velocity_field(path, field, BOX, attrs={"d": {}})
    assert not path.exists()
    write_velocity_field(path, field, BOX)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_velocity_field(path, 2 * field, BOX)
    write_velocity_field(path, 2 * field, BOX, overwrite=True)
    assert np.array_equal(read_velocity_field(path)[0], 2 * field)


def test_the_write_is_atomic(tmp_path, field, monkeypatch):
    """No temporary file after a write; a write that fails midway leaves the old file as
    it was and no temporary file."""
    path = tmp_path / "f.nc"
    write_velocity_field(path, field, BOX)
    assert sorted(os.listdir(tmp_path)) == ["f.nc"]
    before = path.read_bytes()

    def broken(self, target, *args, **kwargs):
        with open(target, "wb") as fh:
            fh.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(xr.Dataset, "to_netcdf", broken)
    with pytest.raises(OSError, match="disk full"):
        write_velocity_field(path, 2 * field, BOX, overwrite=True)
    assert path.read_bytes() == before
    assert glob.glob(str(tmp_path / ".*")) == [] and sorted(os.listdir(tmp_path)) == ["f.nc"]
