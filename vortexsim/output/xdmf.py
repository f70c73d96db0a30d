r"""XDMF (version 3) descriptions of a run's snapshots, for ParaView.

``vortexsim export --xdmf RUN_DIR`` writes into the run directory::

    elements.xdmf   the vortex elements, one point cloud per snapshot
    tracers.xdmf    the passive tracers (only when the run has tracers)
    xdmf_index.bin  0, 1, ..., N-1 (int32, little-endian; N the largest point count):
                    the Polyvertex connectivity, which ParaView's XDMF3 reader needs to
                    make a vertex cell of each point (without it: points but no cells)

Each file is light XML that points into the snapshots themselves (a netCDF4 file is an
HDF5 file whose variables are datasets at the root, ``snapshot_00000010.nc:/element_x``),
so no array is copied.  Layout of each file::

    <Xdmf Version="3.0">
     <Domain>
      <Grid Name="elements" GridType="Collection" CollectionType="Temporal">
       <Grid Name="snapshot_00000000" GridType="Uniform">      one per snapshot
        <Time Value="0.0"/>                                    the snapshot's time
        <Topology TopologyType="Polyvertex" NumberOfElements="N" NodesPerElement="1">
         <DataItem Format="Binary" Endian="Little" NumberType="Int" Precision="4"
           Dimensions="N">xdmf_index.bin</DataItem>            its first N values
        </Topology>
        <Geometry GeometryType="XYZ">
         <DataItem Format="HDF" NumberType="Float" Precision="8" Dimensions="1 N 3">
           snapshot_00000000.nc:/element_x</DataItem>
        </Geometry>
        <Attribute Name="alpha" AttributeType="Vector" Center="Node">  element_alpha
        <Attribute Name="sigma" AttributeType="Scalar" Center="Node">  element_sigma
        <Attribute Name="volume" ...>  element_volume (format 3; NaN: not known)
        <Attribute Name="group" ...>   element_group (format 3; Int, -1: none)
       </Grid>
      </Grid>
     </Domain>
    </Xdmf>

The DataItems state each dataset's own shape, ``1 N 3`` or ``1 N`` (the leading 1 is the
snapshot's ``time`` dimension) and dtype (Float 8 or 4, Int 8), read from each file, so a
run whose element count changes (remeshing in free space) gets per-snapshot sizes.
Paths are relative to the XDMF file: move the run directory as a whole and it still
opens.  The tracers' grids have the geometry only.  The files are written atomically
(:func:`~vortexsim.output.files.atomic_path`) and describe the snapshots present when
they were written: export again after a restart adds the new ones.

The XDMF files take only the layout of the snapshots (names, shapes, dtypes, the time);
each snapshot is read once, one at a time, to verify its checksum
(:func:`.verify.viewed_snapshot`: a mismatch is refused, or with ``--no-verify`` a
warning).  A file that is not a readable netCDF4/HDF5 vortexsim snapshot, or fails its
checksum, is refused with :class:`XdmfError` (a :class:`ValueError`; one line).
"""
from __future__ import annotations

import logging
import math
import os
import xml.etree.ElementTree as ET

import numpy as np

from ..config import ConfigError
from .cf import OLD_TIME, TIME
from .files import atomic_path
from .snapshot import FORMAT, SnapshotError
from .verify import NO_VERIFY_HELP, viewed_snapshot
from .writers import snapshot_files

logger = logging.getLogger(__name__)

__all__ = ["XdmfError", "write_xdmf", "add_command"]

#: the files written into the run directory
ELEMENTS_FILE, TRACERS_FILE = "elements.xdmf", "tracers.xdmf"
#: the Polyvertex connectivity 0, 1, ..., N-1 (int32, little-endian) for the largest N of
#: the run, shared by all grids (each reads its first N values)
INDEX_FILE = "xdmf_index.bin"
#: (ParaView array name, snapshot variable, XDMF AttributeType) of the element fields;
#: each written when the snapshot has the variable (volume and group: format 3)
_ELEMENT_ATTRIBUTES = (("alpha", "element_alpha", "Vector"),
                       ("sigma", "element_sigma", "Scalar"),
                       ("volume", "element_volume", "Scalar"),
                       ("group", "element_group", "Scalar"))


class XdmfError(ConfigError):
    """A directory or snapshot that cannot be exported (one-line message).

    A :class:`ValueError` (through :class:`~vortexsim.config.ConfigError`, which the
    ``vortexsim`` command reports as bad input: one line, exit code 2)."""


# -- reading the layout -----------------------------------------------------------------
def _snapshot_layout(path):
    """``{"time": t, "vars": {name: (shape, kind, precision)}}`` of one snapshot, read
    from its metadata (no arrays but the time), or raise :class:`XdmfError`."""
    import netCDF4  # noqa: PLC0415

    name = os.path.basename(path)
    if not os.path.isfile(path):          # a pipe or a device would block the reader
        raise XdmfError(f"{path} is not a regular file (a pipe, device or directory named "
                        "like a snapshot); remove it from the run directory and export "
                        "again.")
    try:
        ds = netCDF4.Dataset(path, "r")
    except Exception as exc:  # noqa: BLE001 - any reader error means the same here
        raise XdmfError(f"cannot read snapshot {path}: {' '.join(str(exc).split())}; "
                        "remove or replace the file and export again.") from None
    try:
        if not ds.data_model.startswith("NETCDF4"):
            raise XdmfError(f"{path} is {ds.data_model}, not netCDF4 (HDF5), so XDMF cannot "
                            "point into it; export only runs written by vortexsim.")
        fmt = getattr(ds, "vortexsim_format", None)
        if fmt != FORMAT:
            raise XdmfError(f"{path} is not a vortexsim snapshot (vortexsim_format "
                            f"{fmt!r}); remove it from the run directory or export "
                            "another directory.")
        out = {}
        for var_name, var in ds.variables.items():
            if var.dtype.kind not in "fiu":
                continue
            kind = "Float" if var.dtype.kind == "f" else ("Int" if var.dtype.kind == "i"
                                                           else "UInt")
            out[var_name] = (tuple(int(n) for n in var.shape), kind, var.dtype.itemsize)
        time_name = TIME if TIME in out else OLD_TIME       # "time" in formats 1 to 3
        for need in (time_name, "element_x", "tracer_x"):
            if need not in out:
                raise XdmfError(f"snapshot {path} has no variable {need!r}; it is "
                                "truncated or foreign: remove it and export again.")
        try:
            t = float(ds.variables[time_name][:].reshape(-1)[0])
        except Exception:  # noqa: BLE001
            t = math.nan
        if not math.isfinite(t):
            raise XdmfError(f"snapshot {path} has no finite time; remove it and export "
                            "again.")
    except XdmfError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise XdmfError(f"cannot read snapshot {path}: {' '.join(str(exc).split())}; "
                        "remove or replace the file and export again.") from None
    finally:
        ds.close()
    for var_name, (shape, _, _) in out.items():
        if var_name in ("element_x", "tracer_x") and (len(shape) != 3 or shape[0] != 1
                                                       or shape[2] != 3):
            raise XdmfError(f"snapshot {name}: {var_name} has shape {shape}, expected "
                            "(1, N, 3); the file is not a vortexsim snapshot.")
    return {"time": t, "vars": out}


def _verified_layout(path, no_verify):
    """:func:`_snapshot_layout` of ``path`` after its checksum is verified
    (:func:`.verify.viewed_snapshot`; ``no_verify``: a mismatch is a warning)."""
    layout = _snapshot_layout(path)
    try:
        viewed_snapshot(path, no_verify)
    except SnapshotError as exc:
        raise XdmfError(" ".join(str(exc).split())) from None
    return layout


def _run_snapshots(run_dir, no_verify=False):
    """``[(file name, layout)]`` of the snapshots of ``run_dir`` in iteration order, each
    verified (:func:`_verified_layout`)."""
    run_dir = os.fspath(run_dir)
    if not os.path.exists(run_dir):
        raise XdmfError(f"{run_dir} does not exist; give a run directory (the --out of "
                        "vortexsim run).")
    if not os.path.isdir(run_dir):
        raise XdmfError(f"{run_dir} is not a directory; give a run directory (the --out "
                        "of vortexsim run), not a file.")
    files = snapshot_files(run_dir)
    if not files:
        raise XdmfError(f"{run_dir} holds no snapshot_*.nc, so it is not a vortexsim run "
                        "directory; give the --out directory of vortexsim run.")
    return [(os.path.basename(files[i]), _verified_layout(files[i], no_verify))
            for i in sorted(files)]


# -- writing ------------------------------------------------------------------------------
def _data_item(parent, file_name, var_name, layout):
    shape, kind, precision = layout["vars"][var_name]
    item = ET.SubElement(parent, "DataItem", {
        "Format": "HDF", "NumberType": kind, "Precision": str(precision),
        "Dimensions": " ".join(str(n) for n in shape)})
    item.text = f"{file_name}:/{var_name}"
    return item


def _collection(name, snapshots, position, attributes):
    """The XDMF tree of one temporal collection of point clouds."""
    root = ET.Element("Xdmf", {"Version": "3.0"})
    domain = ET.SubElement(root, "Domain")
    coll = ET.SubElement(domain, "Grid", {"Name": name, "GridType": "Collection",
                                          "CollectionType": "Temporal"})
    for file_name, layout in snapshots:
        n = layout["vars"][position][0][1]
        grid = ET.SubElement(coll, "Grid", {"Name": file_name.rsplit(".", 1)[0],
                                            "GridType": "Uniform"})
        ET.SubElement(grid, "Time", {"Value": repr(layout["time"])})
        topology = ET.SubElement(grid, "Topology", {"TopologyType": "Polyvertex",
                                                    "NumberOfElements": str(n),
                                                    "NodesPerElement": "1"})
        connectivity = ET.SubElement(topology, "DataItem", {
            "Format": "Binary", "Endian": "Little", "NumberType": "Int", "Precision": "4",
            "Dimensions": str(n)})
        connectivity.text = INDEX_FILE
        geometry = ET.SubElement(grid, "Geometry", {"GeometryType": "XYZ"})
        _data_item(geometry, file_name, position, layout)
        for array_name, var_name, attribute_type in attributes:
            if var_name not in layout["vars"]:
                continue
            shape = layout["vars"][var_name][0]
            want = (1, n, 3) if attribute_type == "Vector" else (1, n)
            if shape != want:
                raise XdmfError(f"snapshot {file_name}: {var_name} has shape {shape}, "
                                f"expected {want}; the file is not a vortexsim snapshot.")
            attribute = ET.SubElement(grid, "Attribute", {
                "Name": array_name, "AttributeType": attribute_type, "Center": "Node"})
            _data_item(attribute, file_name, var_name, layout)
    ET.indent(root)
    return ET.ElementTree(root)


def _write_tree(tree, path):
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(b'<?xml version="1.0" encoding="utf-8"?>\n')
            tree.write(fh, encoding="utf-8", xml_declaration=False)
            fh.write(b"\n")
    return path


def write_xdmf(run_dir, no_verify=False):
    """Write ``elements.xdmf``, (when the run has tracers) ``tracers.xdmf`` and their
    connectivity ``xdmf_index.bin`` into the run directory ``run_dir``, one temporal
    collection over its snapshots in each XDMF file.

    Returns the paths written, in that order.  Raises :class:`XdmfError` (a :class:`ValueError`) when
    ``run_dir`` is not a run directory (no ``snapshot_*.nc``) or a snapshot cannot be
    read or fails its checksum (``no_verify``: a mismatch is a warning)."""
    snapshots = _run_snapshots(run_dir, no_verify)
    run_dir = os.fspath(run_dir)
    sizes = [layout["vars"][name][0][1] for _, layout in snapshots
             for name in ("element_x", "tracer_x")]
    index_path = os.path.join(run_dir, INDEX_FILE)
    with atomic_path(index_path) as tmp:
        np.arange(max(sizes), dtype="<i4").tofile(tmp)
    written = [_write_tree(_collection("elements", snapshots, "element_x",
                                       _ELEMENT_ATTRIBUTES),
                           os.path.join(run_dir, ELEMENTS_FILE))]
    if any(layout["vars"]["tracer_x"][0][1] > 0 for _, layout in snapshots):
        written.append(_write_tree(_collection("tracers", snapshots, "tracer_x", ()),
                                   os.path.join(run_dir, TRACERS_FILE)))
    written.append(index_path)
    logger.info("wrote %s (%d snapshots)", ", ".join(written), len(snapshots))
    return written


# -- the command --------------------------------------------------------------------------
def add_command(subparsers, common):
    """Register ``vortexsim export`` on the argparse ``subparsers`` (``common``: the parent
    parser with -v/-q)."""
    e = subparsers.add_parser(
        "export", parents=[common], help="describe a run for other tools (ParaView)",
        description=(
            "Write files that let other tools open a run directory in place.  --xdmf: "
            "elements.xdmf and (when the run has tracers) tracers.xdmf, XDMF 3 files that "
            "point into the snapshot_*.nc files (netCDF4 = HDF5) without copying them, "
            "and their shared point connectivity xdmf_index.bin; "
            "open them in ParaView (reader: XDMF3) as point clouds over time, with the "
            "element fields alpha, sigma, volume and group.  Export again after the run "
            "has written more snapshots."))
    e.add_argument("--xdmf", action="store_true", required=True,
                   help="write elements.xdmf, tracers.xdmf and xdmf_index.bin into RUN_DIR "
                        "(the only format for now)")
    e.add_argument("run_dir", metavar="RUN_DIR", help="a run directory (the --out of "
                                                      "vortexsim run)")
    e.add_argument("--no-verify", action="store_true", help=NO_VERIFY_HELP)
    e.set_defaults(func=_cmd_export)
    return e


def _cmd_export(args, argv):
    """``vortexsim export --xdmf RUN_DIR``: write the XDMF files and print their paths.
    Bad input raises :class:`XdmfError` (bad input for the command: one line, exit 2)."""
    for path in write_xdmf(args.run_dir, no_verify=args.no_verify):
        print(path)
    return 0
