"""The commands that look at a run (render, export, info) verify each snapshot's checksum
before using it: a mismatch is refused in one line (exit 2) that names the file and
--no-verify; with --no-verify it is one warning line and the command goes on.  analyze
and plot read no snapshot (only diagnostics.nc), so a corrupted snapshot changes nothing
for them.  render refuses positions that are not finite and frames the points without a
far outlier (a tracer at 1e308), refusing in one line what no picture can span.

Each command runs in a subprocess (its real stderr, a timeout against a hang)."""
from __future__ import annotations

import shutil
import subprocess
import sys
import warnings

import netCDF4
import numpy as np
import pytest

from snapshot_tools import content_checksum
from vortexsim.cli import main
from vortexsim.output import open_netcdf

TINY = ["--device", "cpu", "-q", "--set", "n_phi=6", "--set", "layers=1", "--set",
        "tracers_per_ring=16", "--set", "plot=false"]
NEWEST = "snapshot_00000002.nc"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("verify") / "run"
    assert main(["run", "single_ring", *TINY, "--steps", "2", "--out", str(out)]) == 0
    assert (out / NEWEST).is_file()
    return out


def _vortexsim(*args):
    """(exit code, stdout, stderr lines) of ``python -m vortexsim ARGS``."""
    out = subprocess.run([sys.executable, "-m", "vortexsim", *map(str, args)],
                         capture_output=True, text=True, timeout=180,
                         stdin=subprocess.DEVNULL)
    return out.returncode, out.stdout, out.stderr.strip().splitlines()


def _copy(run_dir, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    return copy


def _set_tracers(path, values, recompute):
    """Set tracer coordinates of the snapshot ``path`` ({(i, axis): value}); with
    ``recompute`` also its checksum, as a forger would (the values are then what is
    tested, not the checksum)."""
    with netCDF4.Dataset(path, "a") as d:
        x = d["tracer_x"][:].data.copy()
        for (i, axis), value in values.items():
            x[0, i, axis] = value
        d["tracer_x"][:] = x
    if recompute:
        ds = open_netcdf(path)
        with netCDF4.Dataset(path, "a") as d:
            d.setncattr("checksum_sha256", content_checksum(ds, dict(ds.attrs)))


@pytest.fixture(scope="module")
def corrupted(run_dir, tmp_path_factory):
    """A copy of the run whose newest snapshot has one tracer moved by 1e-3 (checksum
    left as written)."""
    copy = _copy(run_dir, tmp_path_factory.mktemp("corrupted"))
    with netCDF4.Dataset(copy / NEWEST) as d:
        x0 = float(d["tracer_x"][0, 0, 0])
    _set_tracers(copy / NEWEST, {(0, 0): x0 + 1e-3}, recompute=False)
    return copy


def _commands(run, tmp_path):
    return {"render": ["render", run, "--out", tmp_path / "frame.png"],
            "export": ["export", "--xdmf", run],
            "info": ["info", run / NEWEST]}


@pytest.mark.parametrize("command", ["render", "export", "info"])
def test_a_checksum_mismatch_is_refused_in_one_line_naming_no_verify(corrupted, tmp_path,
                                                                    command):
    rc, out, err = _vortexsim(*_commands(corrupted, tmp_path)[command])
    assert rc == 2, err
    assert len(err) == 1, err
    assert err[0].startswith("vortexsim: error: ") and str(corrupted / NEWEST) in err[0]
    assert "checksum mismatch" in err[0] and "--no-verify reads it anyway" in err[0]
    assert out == ""
    assert not (tmp_path / "frame.png").exists()
    assert not (corrupted / "elements.xdmf").exists()


@pytest.mark.parametrize("command", ["render", "export", "info"])
def test_no_verify_reads_it_with_one_warning(corrupted, tmp_path, command):
    copy = _copy(corrupted, tmp_path)       # export writes into the run directory
    rc, out, err = _vortexsim(*_commands(copy, tmp_path)[command], "--no-verify", "-q")
    assert rc == 0, err
    assert len(err) == 1, err
    assert "WARNING" in err[0] and str(copy / NEWEST) in err[0]
    assert "checksum mismatch" in err[0] and "(--no-verify)" in err[0]
    if command == "render":
        assert (tmp_path / "frame.png").stat().st_size > 0
    elif command == "export":
        assert (copy / "elements.xdmf").is_file() and (copy / "tracers.xdmf").is_file()
    else:
        assert "checksum MISMATCH" in out and "NOT restartable" in out


def test_intact_snapshots_are_read_without_a_word(run_dir, tmp_path):
    copy = _copy(run_dir, tmp_path)
    for command in _commands(copy, tmp_path).values():
        rc, out, err = _vortexsim(*command, "-q")
        assert rc == 0 and err == [], (command, err)
    assert "checksum ok" in out


def test_analyze_and_plot_read_no_snapshot(run_dir, corrupted, tmp_path):
    """They summarize diagnostics.nc only: the corrupted snapshot is not read, and the
    summary is that of the intact run."""
    rc, intact, err = _vortexsim("analyze", run_dir)
    assert rc == 0 and err == [], err
    rc, out, err = _vortexsim("analyze", corrupted)
    assert rc == 0 and err == [], err
    assert out.replace(str(corrupted), "RUN") == intact.replace(str(run_dir), "RUN")
    rc, out, err = _vortexsim("plot", corrupted, "--out", tmp_path / "p.png", "--what",
                              "energy")
    assert rc == 0 and err == [], err
    assert (tmp_path / "p.png").stat().st_size > 0


# -- positions a picture cannot place -----------------------------------------------------
def _lit_pixels(png):
    from PIL import Image
    image = np.asarray(Image.open(png))
    return int(np.count_nonzero(image.max(axis=2)))


def test_render_frames_the_other_points_of_a_tracer_at_1e308(run_dir, tmp_path):
    copy = _copy(run_dir, tmp_path)
    _set_tracers(copy / NEWEST, {(3, 0): 1e308}, recompute=True)
    frame = tmp_path / "frame.png"
    rc, _, err = _vortexsim("render", copy, "--out", frame, "-q")
    assert rc == 0, err
    assert len(err) == 1 and "WARNING" in err[0], err
    assert "1 of 16 points lie far from the others" in err[0] and "1e+308" in err[0]
    # the 15 others spread over the frame, not shrunk to a pixel by the one far away
    assert _lit_pixels(frame) >= 10


def test_render_refuses_positions_that_span_beyond_floating_point(run_dir, tmp_path):
    copy = _copy(run_dir, tmp_path)
    _set_tracers(copy / NEWEST, {(i, 0): (-1e308, 1e308)[i % 2] for i in range(8)},
                 recompute=True)
    rc, out, err = _vortexsim("render", copy, "--out", tmp_path / "frame.png")
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("vortexsim: error: ") and "Traceback" not in err[0]
    assert "span more than the floating-point range" in err[0]
    assert "Camera extent" not in err[0]
    assert not (tmp_path / "frame.png").exists()


@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
@pytest.mark.parametrize("no_verify", [False, True])
def test_render_refuses_positions_that_are_not_finite(run_dir, tmp_path, value, no_verify):
    copy = _copy(run_dir, tmp_path)
    _set_tracers(copy / NEWEST, {(2, 1): value}, recompute=True)
    rc, out, err = _vortexsim("render", copy, "--out", tmp_path / "frame.png",
                              *(["--no-verify"] if no_verify else []))
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"vortexsim: error: {copy / NEWEST}: tracer_x holds 1 point(s)")
    assert "not finite" in err[0]
    assert not (tmp_path / "frame.png").exists()


@pytest.mark.parametrize("far", [[[0, 0, 0], [1e308, 0, 0]],
                                 [[-1e308, 0, 0], [1e308, 0, 0]],
                                 [[-1e308, -1e308, -1e308], [1e308, 1e308, 1e308]]])
def test_camera_refuses_what_no_picture_spans_without_a_floating_point_warning(far):
    from vortexsim.viz import Camera
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # an overflow warning is a stray line
        with pytest.raises(ValueError, match="span more than the floating-point range"):
            Camera().fit(np.array(far, dtype=float), size=(64, 48))


def test_camera_leaves_a_far_point_out_of_the_frame():
    from vortexsim.viz import Camera, render_points
    ring = np.array([[np.cos(a), 0.0, np.sin(a)] for a in np.linspace(0, 6, 40)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        camera = Camera().fit(np.vstack([ring, [[1e308, 0, 0]]]), size=(64, 48))
        image = render_points(np.vstack([ring, [[1e308, 0, 0]]]), size=(64, 48),
                              camera=camera)
    assert camera.extent == Camera().fit(ring, size=(64, 48)).extent
    assert np.array_equal(image, render_points(ring, size=(64, 48), camera=camera))
