"""diagnostics.nc written by netCDF4 itself is the file xarray's to_netcdf writes (of the
file's CF layout: the ring names as the auxiliary coordinate ``ring_name``)."""
import netCDF4
import numpy as np
import xarray as xr

from vortexsim.cases.registry import make_case
from vortexsim.output.diagnostics import DiagnosticsLog, read_rows, rows_dataset


def test_the_diagnostics_file_is_the_one_xarray_writes(tmp_path):
    sim = make_case("leapfrog", device="cpu", progress=False, n_phi=6, layers=1,
                    tracers_per_ring=4)
    rows = []
    for i in range(4):
        row = dict(sim.diagnostics(), dt_next=0.1, t=0.1 * i, iteration=i)
        rows.append(row)
    meta = {"case": "leapfrog", "vortexsim_version": "x", "n_elements": 12, "tol": 1e-6,
            "method": None}
    log = DiagnosticsLog(tmp_path / "diagnostics.nc", meta, rows, history="made here")
    log.write()
    ds = rows_dataset(rows, meta, "made here")
    ds = ds.drop_indexes("ring").rename_vars({"ring": "ring_name"})
    ds.to_netcdf(tmp_path / "xarray.nc", engine="netcdf4", format="NETCDF4",
                 encoding={v: {"_FillValue": None} for v in ds.variables if v != "ring_name"})
    with xr.open_dataset(tmp_path / "diagnostics.nc") as a, \
            xr.open_dataset(tmp_path / "xarray.nc") as b:
        assert a.identical(b)
    with netCDF4.Dataset(tmp_path / "diagnostics.nc") as a, \
            netCDF4.Dataset(tmp_path / "xarray.nc") as b:
        assert {k: str(v) for k, v in a.__dict__.items()} == \
            {k: str(v) for k, v in b.__dict__.items()}
        assert list(a.dimensions) == list(b.dimensions)
        for name in b.variables:
            x, y = a[name], b[name]
            assert (x.dtype, x.dimensions, x.ncattrs()) == (y.dtype, y.dimensions, y.ncattrs())
            assert {k: str(x.getncattr(k)) for k in x.ncattrs()} == \
                {k: str(y.getncattr(k)) for k in y.ncattrs()}
    back = read_rows(tmp_path / "diagnostics.nc")
    assert [r["iteration"] for r in back] == [0, 1, 2, 3]
    np.testing.assert_array_equal(back[2]["ring_centre"], rows[2]["ring_centre"])
    assert back[0]["ring_names"] == list(rows[0]["ring_names"])
