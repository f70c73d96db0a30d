"""XDMF export for ParaView (vortexsim/output/xdmf.py, issue 18): the XML parses, has one
grid per snapshot at the snapshots' times, and every DataItem names a dataset of the
stated shape and type in the referenced file (h5py); per-snapshot sizes of a remeshed
run; ParaView's own XDMF3 reader (pvpython, where installed); refused directories."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import xarray as xr

from vortexsim.cli import main
from vortexsim.output import read_snapshot, write_snapshot
from vortexsim.output.writers import snapshot_files
from vortexsim.output.xdmf import XdmfError, add_command, write_xdmf, _cmd_export

h5py = pytest.importorskip("h5py")

TINY = ["--set", "n_phi=6", "--set", "layers=1", "--set", "plot=false", "--device", "cpu",
        "-q"]


def _run(out, *extra):
    rc = main(["run", "single_ring", *TINY, "--set", "t_end=0.3", "--set",
               "snapshot_interval=0.1", *extra, "--out", str(out)])
    assert rc == 0
    return out


@pytest.fixture(scope="module")
def ring_run(tmp_path_factory):
    """single_ring with 6 tracers, 4 snapshots."""
    return _run(tmp_path_factory.mktemp("xdmf") / "ring", "--set", "tracers_per_ring=6")


@pytest.fixture(scope="module")
def remeshed_run(tmp_path_factory):
    """single_ring remeshed every step in free space: the element count changes."""
    return _run(tmp_path_factory.mktemp("xdmf") / "remeshed", "--set", "tracers_per_ring=0",
                "--set", "remesh_every=1", "--set", "remesh_spacing=0.5")


def _grids(xdmf_path):
    root = ET.parse(xdmf_path).getroot()
    assert root.tag == "Xdmf" and root.get("Version") == "3.0"
    (collection,) = root.find("Domain").findall("Grid")
    assert collection.get("GridType") == "Collection"
    assert collection.get("CollectionType") == "Temporal"
    grids = collection.findall("Grid")
    assert all(g.get("GridType") == "Uniform" for g in grids)
    return grids


def _check_data_item(item, directory):
    """The dataset exists in the referenced file with the stated dimensions and type."""
    assert item.get("Format") == "HDF"
    file_name, _, dataset = item.text.strip().partition(":")
    assert not os.path.isabs(file_name) and dataset.startswith("/")
    with h5py.File(os.path.join(directory, file_name), "r") as f:
        assert dataset in f, (file_name, dataset)
        d = f[dataset]
        assert " ".join(map(str, d.shape)) == item.get("Dimensions")
        assert {"f": "Float", "i": "Int"}[d.dtype.kind] == item.get("NumberType")
        assert str(d.dtype.itemsize) == item.get("Precision")
        return d.shape


def _check_file(xdmf_path, run_dir, position, arrays):
    """Grids match the snapshots (count, names, times, sizes); returns the sizes."""
    snapshots = [snapshot_files(run_dir)[i] for i in sorted(snapshot_files(run_dir))]
    grids = _grids(xdmf_path)
    assert len(grids) == len(snapshots) >= 2
    sizes = []
    for grid, path in zip(grids, snapshots):
        with xr.open_dataset(path) as ds:
            assert float(grid.find("Time").get("Value")) == float(ds.t.values[0])
            n = ds.sizes[position.split("_")[0]]
        topology = grid.find("Topology")
        assert topology.get("TopologyType") == "Polyvertex"
        assert int(topology.get("NumberOfElements")) == n
        index = topology.find("DataItem")                  # connectivity 0 .. n-1
        assert index.get("Format") == "Binary" and index.get("Dimensions") == str(n)
        ids = np.fromfile(os.path.join(run_dir, index.text.strip()), dtype="<i4")
        assert (index.get("NumberType"), index.get("Precision"), index.get("Endian")) == (
            "Int", "4", "Little")
        np.testing.assert_array_equal(ids[:n], np.arange(n))
        geometry = grid.find("Geometry")
        assert geometry.get("GeometryType") == "XYZ"
        item = geometry.find("DataItem")
        assert item.text.strip() == f"{os.path.basename(path)}:/{position}"
        assert _check_data_item(item, run_dir) == (1, n, 3)
        names = []
        for attribute in grid.findall("Attribute"):
            names.append(attribute.get("Name"))
            shape = _check_data_item(attribute.find("DataItem"), run_dir)
            assert shape == ((1, n, 3) if attribute.get("AttributeType") == "Vector"
                             else (1, n))
        assert names == arrays
        sizes.append(n)
    return sizes


def test_elements_and_tracers(ring_run):
    paths = write_xdmf(ring_run)
    assert paths == [str(ring_run / f) for f in ("elements.xdmf", "tracers.xdmf",
                                                  "xdmf_index.bin")]
    sizes = _check_file(paths[0], ring_run, "element_x", ["alpha", "sigma", "volume", "group"])
    assert len(set(sizes)) == 1 and sizes[0] > 0
    assert _check_file(paths[1], ring_run, "tracer_x", []) == [6] * len(sizes)
    assert not [f for f in os.listdir(ring_run) if f.endswith(".tmp")]   # atomic writes
    assert write_xdmf(ring_run) == paths                                   # idempotent


def test_remeshed_run_has_per_snapshot_sizes(remeshed_run):
    paths = write_xdmf(remeshed_run)
    assert paths == [str(remeshed_run / "elements.xdmf"),          # no tracers: no file
                     str(remeshed_run / "xdmf_index.bin")]
    sizes = _check_file(paths[0], remeshed_run, "element_x",
                        ["alpha", "sigma", "volume", "group"])
    assert len(set(sizes)) > 1, sizes


def test_float32_snapshot_has_precision_4(ring_run, tmp_path):
    """A snapshot stored in float32 (the dtype is the state's own) is described as such."""
    snap = read_snapshot(snapshot_files(ring_run)[0])
    state = snap.state
    for key in ("x", "alpha", "sigma"):
        state["elements"][key] = np.asarray(state["elements"][key], dtype=np.float32)
    state["tracers"]["x"] = np.asarray(state["tracers"]["x"], dtype=np.float32)
    write_snapshot(tmp_path / "snapshot_00000000.nc", state, snap.config,
                   {"case": "single_ring"}, snap.schedule)
    (elements, tracers, _) = write_xdmf(tmp_path)
    grid = _grids(elements)[0]
    precisions = {a.get("Name"): a.find("DataItem").get("Precision")
                  for a in grid.findall("Attribute")}
    assert grid.find("Geometry/DataItem").get("Precision") == "4"
    assert precisions == {"alpha": "4", "sigma": "4", "volume": "8", "group": "8"}
    assert _grids(tracers)[0].find("Geometry/DataItem").get("Precision") == "4"
    for item in ET.parse(elements).getroot().iter("DataItem"):
        if item.get("Format") == "HDF":
            _check_data_item(item, tmp_path)


def test_not_a_run_directory(tmp_path):
    with pytest.raises(ValueError, match="no snapshot_.*not a vortexsim run directory"):
        write_xdmf(tmp_path)
    with pytest.raises(ValueError, match="does not exist"):
        write_xdmf(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        write_xdmf(tmp_path / "file")
    assert os.listdir(tmp_path) == ["file"]                      # nothing written


def test_unreadable_snapshot(ring_run, tmp_path):
    (tmp_path / "snapshot_00000000.nc").write_bytes(b"not netCDF at all")
    with pytest.raises(XdmfError, match=r"cannot read snapshot .*snapshot_00000000\.nc"):
        write_xdmf(tmp_path)
    # a netCDF4 file that is not a vortexsim snapshot
    xr.Dataset({"a": ("n", np.zeros(3))}).to_netcdf(tmp_path / "snapshot_00000000.nc",
                                                    engine="netcdf4")
    with pytest.raises(XdmfError, match="not a vortexsim snapshot"):
        write_xdmf(tmp_path)
    assert not (tmp_path / "elements.xdmf").exists()


def _parser():
    p = argparse.ArgumentParser(prog="vortexsim")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=0)
    common.add_argument("-q", "--quiet", action="count", default=0)
    add_command(p.add_subparsers(dest="command"), common)
    return p


def test_command(ring_run, tmp_path, capsys):
    argv = ["export", "--xdmf", "-q", str(ring_run)]
    args = _parser().parse_args(argv)
    assert args.func is _cmd_export and args.quiet == 1
    assert args.func(args, argv) == 0
    assert capsys.readouterr().out.split() == [
        str(ring_run / f) for f in ("elements.xdmf", "tracers.xdmf", "xdmf_index.bin")]
    args = _parser().parse_args(["export", "--xdmf", str(tmp_path)])
    with pytest.raises(XdmfError, match="not a vortexsim run directory"):
        args.func(args, [])
    with pytest.raises(SystemExit):                              # --xdmf is required
        _parser().parse_args(["export", str(ring_run)])


PVPYTHON_SCRIPT = r"""
import json, sys
from paraview.simple import Xdmf3ReaderT
reader = Xdmf3ReaderT(FileName=[sys.argv[1]])          # ParaView's XDMF3 reader
out = []
for t in reader.TimestepValues:
    reader.UpdatePipeline(t)    # (paraview.simple.UpdatePipeline(time=0.0) ignores t = 0)
    data = reader.GetClientSideObject().GetOutputDataObject(0)
    pd = data.GetPointData()
    out.append({"t": t, "points": data.GetNumberOfPoints(), "cells": data.GetNumberOfCells(),
                "x0": list(data.GetPoint(0)),
                "arrays": {pd.GetArrayName(i): pd.GetArray(i).GetNumberOfComponents()
                           for i in range(pd.GetNumberOfArrays())},
                "alpha_last": list(pd.GetArray("alpha").GetTuple(data.GetNumberOfPoints() - 1))})
print("RESULT " + json.dumps(out))
"""


@pytest.mark.skipif(shutil.which("pvpython") is None,
                    reason="pvpython (ParaView, Debian's paraview package) not installed")
def test_paraview_reads_it(remeshed_run, tmp_path):
    path = write_xdmf(remeshed_run)[0]
    script = tmp_path / "read.py"
    script.write_text(PVPYTHON_SCRIPT)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(["pvpython", "--force-offscreen-rendering", str(script), path],
                          capture_output=True, text=True, timeout=120, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout + proc.stderr
    got = json.loads(lines[-1][len("RESULT "):])
    grids = _grids(path)
    assert [g["t"] for g in got] == pytest.approx(
        [float(g.find("Time").get("Value")) for g in grids])
    sizes = [int(g.find("Topology").get("NumberOfElements")) for g in grids]
    assert len(set(sizes)) > 1
    assert [g["points"] for g in got] == sizes
    assert [g["cells"] for g in got] == sizes                     # one vertex per point
    for g, (i, path) in zip(got, sorted(snapshot_files(remeshed_run).items())):
        assert g["arrays"] == {"alpha": 3, "sigma": 1, "volume": 1, "group": 1}
        with xr.open_dataset(path) as ds:                         # the values themselves
            assert g["x0"] == ds.element_x.values[0, 0].tolist()
            assert g["alpha_last"] == ds.element_alpha.values[0, -1].tolist()
