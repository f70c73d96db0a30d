"""Hostile and corrupted files (issue 19, defects 5, 6 and 8): every attribute and
variable of a snapshot is checked before use (vortexsim/output/snapshot.py,
vortexsim/output/validate.py), so `vortexsim info` and `vortexsim restart` refuse a bad
file with one line and exit 2; the checksum of format 2 covers the config TOML text
(format 1 files still verify under their own); `info` escapes control characters."""
from __future__ import annotations

import json
import os
import shutil

import netCDF4
import numpy as np
import pytest
import xarray as xr

from vortexsim.cli import main
from vortexsim.output import FORMAT_VERSION, open_netcdf, read_snapshot, snapshot
from snapshot_tools import content_checksum
from vortexsim.output.validate import InvalidValue, json_object, printable

RUN = ["--set", "n_phi=8", "--set", "tracers_per_ring=16", "--device", "cpu", "-q",
       "--set", "t_end=0.2", "--set", "snapshot_interval=0.1", "--set", "plot=false"]
SNAP = "snapshot_00000002.nc"          # t = 0.1, iteration 2, dt = 0.05


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostile") / "run"
    assert main(["run", "single_ring", *RUN, "--out", str(out)]) == 0
    return out


def _recompute_checksum(path):
    """Rewrite the checksum of ``path`` for its content, as a forger would."""
    ds = open_netcdf(path)
    checksum = content_checksum(ds, dict(ds.attrs))
    with netCDF4.Dataset(path, "a") as d:
        d.setncattr("checksum_sha256", checksum)


def _forge(run_dir, tmp_path, attrs=None, variables=None, recompute=False, name="forged.nc"):
    """A copy of the run's snapshot with ``attrs`` (name: value; None deletes) and
    ``variables`` (name: function of the values array, changed in place) changed."""
    path = tmp_path / name
    shutil.copy(run_dir / SNAP, path)
    with netCDF4.Dataset(path, "a") as d:
        for key, value in (attrs or {}).items():
            if value is None:
                d.delncattr(key)
            else:
                d.setncattr(key, value)
        for key, change in (variables or {}).items():
            values = d[key][:].data.copy()
            change(values)
            d[key][:] = values
    if recompute:
        _recompute_checksum(path)
    return path


def _config(run_dir, **changes):
    with xr.open_dataset(run_dir / SNAP, engine="netcdf4") as ds:
        config = json.loads(ds.attrs["config_json"])
    config.update(changes)
    return json.dumps(config)


def _refused(path, match, capsys):
    """`info` and `restart` each: one line on stderr naming ``match``, exit 2, no
    traceback, no raw escape character."""
    for command in (["info", str(path)], ["restart", str(path), "-q"]):
        capsys.readouterr()
        assert main(command) == 2, command
        captured = capsys.readouterr()
        err = captured.err
        assert err.startswith("vortexsim: error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err and "\x1b" not in err, err
        assert match in err, (command, err)
        assert captured.out == ""


def _set(index, value):
    def change(values):
        values[index] = value
    return change


# -- defect 5: malformed attributes and foreign files: one line, exit 2 -------------------------
@pytest.mark.parametrize("attrs, match", [
    ({"config_json": "[1, 2]"}, "config_json is a JSON array"),
    ({"config_json": "null"}, "config_json is a JSON null"),
    ({"config_json": "{\"case\": \"single_ring\", "}, "config_json is not valid JSON"),
    ({"config_json": "[" * 5000 + "]" * 5000}, "nests deeper"),
    ({"config_json": np.array([1, 2])},
     "config_json = [1, 2] (an array of 2 int64), expected text"),
    ({"config_json": "{\"n_elements\": NaN}"}, "NaN is not a number"),
    ({"config_json": "{\"n_elements\": \"\\u001b[2Jabc\", \"n_tracers\": 16}"},
     "n_elements of config_json = '\\x1b[2Jabc', expected an integer"),
    ({"vortexsim_format_version": "abc"}, "vortexsim_format_version = 'abc', expected an integer"),
    ({"vortexsim_format_version": 0}, "expected 1 to"),
    ({"vortexsim_format_version": 99}, "Upgrade vortexsim"),
    ({"vortexsim_format_version": None}, "missing vortexsim_format_version"),
    ({"checksum_sha256": "abc"}, "is not a SHA-256"),
    ({"checksum_sha256": np.int64(3)}, "checksum_sha256 = 3"),
    ({"config": np.array([1.0, 2.0])}, "config = [1.0, 2.0]"),
    ({"history": np.int32(7)}, "history = 7"),
])
def test_malformed_attributes_are_one_line(attrs, match, run_dir, tmp_path, capsys):
    _refused(_forge(run_dir, tmp_path, attrs), match, capsys)


def test_malformed_n_elements(run_dir, tmp_path, capsys):
    """n_elements that is text, a fraction, or another size than the arrays."""
    for value, match in [("abc", "n_elements of config_json = 'abc', expected an integer"),
                         (2.5, "n_elements of config_json = 2.5"),
                         (57, "dimension element has length 56, but the file's n_elements of "
                              "config_json is 57")]:
        path = _forge(run_dir, tmp_path, {"config_json": _config(run_dir, n_elements=value)})
        _refused(path, match, capsys)


def test_variables_of_the_wrong_dtype_or_shape(run_dir, tmp_path, capsys):
    with xr.open_dataset(run_dir / SNAP, engine="netcdf4") as ds:
        ds = ds.load()
    bad_dtype = ds.copy()
    bad_dtype["element_sigma"] = bad_dtype["element_sigma"].astype("int32")
    bad_dtype.to_netcdf(tmp_path / "dtype.nc")
    _refused(tmp_path / "dtype.nc", "element_sigma has dtype int32, expected float32 or "
             "float64", capsys)
    bad_dtype = ds.copy()
    bad_dtype["iteration"] = bad_dtype["iteration"].astype("float64") + 0.5
    bad_dtype.to_netcdf(tmp_path / "iteration.nc")
    _refused(tmp_path / "iteration.nc", "iteration has dtype float64", capsys)
    ds.isel(tracer=slice(0, 3)).to_netcdf(tmp_path / "shape.nc")
    _refused(tmp_path / "shape.nc", "dimension tracer has length 3, but the file's n_tracers "
             "of config_json is 16", capsys)


def test_foreign_files_that_carry_a_vortexsim_format(tmp_path, capsys):
    """A foreign file that names the snapshot or diagnostics format, or whose
    vortexsim_format is not text, is refused (restart) or described (info) without a
    traceback."""
    data = {"temperature": ("x", np.arange(3.0), {"units": "K"})}
    xr.Dataset(data, attrs={"vortexsim_format": "vortexsim snapshot"}).to_netcdf(
        tmp_path / "snap.nc")
    _refused(tmp_path / "snap.nc", "incomplete vortexsim snapshot", capsys)
    xr.Dataset(data, attrs={"vortexsim_format": "vortexsim diagnostics"}).to_netcdf(
        tmp_path / "diag.nc")
    assert main(["info", str(tmp_path / "diag.nc")]) == 2
    err = capsys.readouterr().err
    assert "no time variable" in err and err.count("\n") == 1
    assert main(["restart", str(tmp_path / "diag.nc")]) == 2
    err = capsys.readouterr().err
    assert "not a snapshot" in err and err.count("\n") == 1
    xr.Dataset(data, attrs={"vortexsim_format": np.array([1, 2])}).to_netcdf(
        tmp_path / "array.nc")
    assert main(["info", str(tmp_path / "array.nc")]) == 0
    assert "not a vortexsim file" in capsys.readouterr().out
    assert main(["restart", str(tmp_path / "array.nc")]) == 2
    err = capsys.readouterr().err
    assert "foreign netCDF file: vortexsim_format = [1, 2]" in err and err.count("\n") == 1


def test_files_that_are_no_regular_file_or_declare_too_much_data(tmp_path, capsys,
                                                                 monkeypatch):
    """A FIFO would block the reader, /dev/zero is endless; a file may declare variables
    far larger than it stores (and than the memory): refused before loading."""
    fifo = tmp_path / "fifo.nc"
    os.mkfifo(fifo)
    _refused(fifo, "is not a regular file", capsys)
    with netCDF4.Dataset(tmp_path / "huge.nc", "w") as d:
        d.createDimension("element", 10**7)
        d.createVariable("element_sigma", "f8", ("element",), chunksizes=(2**16,))
        d.setncattr("vortexsim_format", "vortexsim snapshot")
    assert os.path.getsize(tmp_path / "huge.nc") < 10**5
    monkeypatch.setattr(snapshot, "_available_memory", lambda: 2**25)
    _refused(tmp_path / "huge.nc", "declares variables of 0.0745 GiB, more than the 0.0312 GiB",
             capsys)


# -- defect 6: values that no run writes, even with the checksum recomputed --------------------
@pytest.mark.parametrize("variables, attrs, match", [
    ({"t": _set(0, np.nan)}, {}, "time = nan, expected a finite number"),
    ({"t": _set(0, -1.0)}, {}, "time = -1.0 is before the run's start"),
    ({"t": _set(0, 1e6)}, {}, "time = 1000000.0 is beyond 2 steps of at most dt = 0.05"),
    ({"iteration": _set(0, -3)}, {}, "iteration = -3"),
    ({"dt_next": _set(0, 0.0)}, {}, "dt_next = 0.0, expected a number > 0"),
    ({"dt_next": _set(0, np.inf)}, {}, "dt_next = inf"),
    ({"dt_next": _set(0, 1.0)}, {}, "exceeds the config's dt"),
    ({"element_sigma": _set((0, 5), 0.0)}, {}, "element_sigma holds 1 value(s) <= 0"),
    ({"element_sigma": _set((0, 5), np.nan)}, {}, "element_sigma holds 1 non-finite"),
    ({"element_x": _set((0, 1, 2), np.inf)}, {}, "element_x holds 1 non-finite"),
    ({"element_alpha": _set((0, 1, 2), np.nan)}, {}, "element_alpha holds 1 non-finite"),
    ({"tracer_x": _set((0, 3, 0), -np.inf)}, {}, "tracer_x holds 1 non-finite"),
    ({"sigma_range": _set((0, 0), 5.0)}, {}, "has min > max"),
    ({"sigma_range": _set((0, 0), -1.0)}, {}, "sigma_range = -1.0, expected a number > 0"),
    ({"fmm_depth": _set(0, 99)}, {}, "fmm_depth = 99"),
    ({"speed_last": _set(0, -1.0)}, {}, "speed_last = -1.0"),
    ({"step_strain_last": _set(0, -1.0)}, {}, "step_strain_last = -1.0"),
    ({}, {"run_snapshot_interval": 0.0}, "run_snapshot_interval = 0.0, expected a number > 0"),
    ({}, {"run_diagnostics_interval": np.nan}, "run_diagnostics_interval = nan"),
    ({}, {"run_next_snapshot": 0, "run_snapshot_interval": 0.02},
     "run_next_snapshot = 0 puts the next output at t = 0.0, more than 4 intervals"),
    ({}, {"run_diagnostics_rows": -1}, "run_diagnostics_rows = -1"),
    ({}, {"run_stop_time": np.inf}, "run_stop_time = inf"),
    ({}, {"run_stop_iteration": 2.5}, "run_stop_iteration = 2.5"),
    ({}, {"run_t0": 0.5}, "is before the run's start (run_t0 = 0.5)"),
    ({}, {"run_state_json": "[1]"}, "run_state_json is a JSON array"),
])
def test_values_no_run_writes_are_refused_although_the_checksum_matches(
        variables, attrs, match, run_dir, tmp_path, capsys):
    path = _forge(run_dir, tmp_path, attrs, variables, recompute=True)
    _refused(path, match, capsys)
    assert "although the checksum matches" in _error(path)


@pytest.mark.parametrize("changes, match", [
    ({"dt": -1.0}, "config_json: dt must be > 0"),
    ({"n_phi": 2.5}, "config_json: n_phi must be an integer"),
    ({"sigma": 0.0}, "config_json: sigma must be > 0"),
    ({"kernel": 3}, "config_json: kernel must be a string"),
    ({"t0": 1e9}, "before the run's start (t0 of config_json"),
    ({"t0": "0"}, "t0 of config_json = '0', expected a number"),
    ({"case": 5}, "case of config_json = 5"),
    ({"groups": {"a": 1}}, "groups of config_json"),
    ({"kernel": "gaussian\x1b[2J"}, "config_json holds 'gaussian\\x1b[2J', text with control"),
    ({"\x1b[2J": 1}, "config_json holds '\\x1b[2J'"),
])
def test_stored_config_values_are_checked(changes, match, run_dir, tmp_path, capsys):
    path = _forge(run_dir, tmp_path, {"config_json": _config(run_dir, **changes)},
                  recompute=True)
    _refused(path, match, capsys)


def _error(path):
    try:
        read_snapshot(path)
    except Exception as exc:  # noqa: BLE001
        return str(exc)
    return ""


def test_changed_values_without_a_new_checksum_are_a_mismatch(run_dir, tmp_path, capsys):
    path = _forge(run_dir, tmp_path, variables={"t": _set(0, np.nan)})
    _refused(path, "checksum mismatch", capsys)


def test_edited_config_text_fails_the_checksum(run_dir, tmp_path, capsys):
    """Format 2: the config TOML text (which a restart copies into its snapshots) is
    covered by the checksum, and so are the case and kind attributes."""
    with xr.open_dataset(run_dir / SNAP, engine="netcdf4") as ds:
        assert int(ds.attrs["vortexsim_format_version"]) == FORMAT_VERSION == 4
        text = ds.attrs["config"]
    assert "n_phi = 8" in text
    for attrs in ({"config": text.replace("n_phi = 8", "n_phi = 800000000")},
                  {"config": None}, {"case": "leapfrog"}, {"snapshot_kind": "final"}):
        _refused(_forge(run_dir, tmp_path, attrs), "checksum mismatch", capsys)
    # the untouched file reads back and restarts
    assert read_snapshot(run_dir / SNAP).attrs["config"] == text


def test_format_1_snapshots_still_verify_under_their_own_checksum(run_dir, tmp_path, capsys):
    """A snapshot of the former code (format 1: checksum over the state, config_json and
    schedule) is read, described and restarted; its numbers are still checked."""
    old = tmp_path / "old"
    shutil.copytree(run_dir, old)
    path = old / SNAP
    with netCDF4.Dataset(path, "a") as d:
        d.setncattr("vortexsim_format_version", np.int64(1))
    _recompute_checksum(path)
    snap = read_snapshot(path)
    assert snap.iteration == 2 and snap.t == 0.1
    capsys.readouterr()
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "checksum ok (format 1: the checksum does not cover the config TOML text)" in out
    with netCDF4.Dataset(path, "a") as d:          # format 1 never covered the text
        d.setncattr("config", "# edited\n" + d.getncattr("config"))
    read_snapshot(path)
    with netCDF4.Dataset(path, "a") as d:          # but it covers the numbers
        d["t"][0] = 0.2
    _refused(path, "checksum mismatch", capsys)
    with netCDF4.Dataset(path, "a") as d:
        d["t"][0] = 0.1
    assert main(["restart", str(path), "--steps", "1", "--out", str(tmp_path / "cont"),
                 "-q"]) == 0
    assert int(read_snapshot(tmp_path / "cont" / "snapshot_00000003.nc").attrs[
        "vortexsim_format_version"]) == FORMAT_VERSION


def test_format_3_names_and_units_still_read_and_restart(run_dir, tmp_path, capsys):
    """Files of format 3 and older call the time coordinate ``time`` and hold the case's
    unit strings in ``units`` (vortexsim.output.cf): their snapshots verify, restart and
    are described, and their diagnostics are read back, under the current names."""
    from vortexsim.output.diagnostics import read_rows

    old = tmp_path / "old"
    shutil.copytree(run_dir, old)
    for path in [old / SNAP, old / "diagnostics.nc"]:
        ds = open_netcdf(path).rename({"t": "time"})     # (netCDF's in-place rename of a
        for var in ds.variables.values():                # coordinate loses its values)
            if "case_units" in var.attrs:
                var.attrs["units"] = var.attrs.pop("case_units")
        ds.attrs["vortexsim_format_version"] = np.int64(3)
        ds.to_netcdf(path, engine="netcdf4")
    _recompute_checksum(old / SNAP)
    snap = read_snapshot(old / SNAP)
    assert snap.iteration == 2 and snap.t == 0.1
    rows = read_rows(old / "diagnostics.nc")
    assert [r["t"] for r in rows][:2] == [0.0, 0.05]
    assert main(["info", str(old / "diagnostics.nc")]) == 0
    assert "[L^3/T] total vorticity" in capsys.readouterr().out
    assert main(["restart", str(old / SNAP), "--steps", "1", "--out", str(tmp_path / "cont"),
                 "-q"]) == 0
    new = read_snapshot(tmp_path / "cont" / "snapshot_00000003.nc")
    assert int(new.attrs["vortexsim_format_version"]) == FORMAT_VERSION


def _groups(run_dir, change):
    """``groups_json`` of the run's snapshot with ``change`` applied to its list."""
    with xr.open_dataset(run_dir / SNAP, engine="netcdf4") as ds:
        groups = json.loads(ds.attrs["groups_json"])["groups"]
    change(groups)
    return json.dumps({"groups": groups})


def _stop(groups):
    groups[0]["stop"] -= 1


@pytest.mark.parametrize("attrs, variables, match", [
    (None, {"element_group": _set((0, 0), 5)},
     "group labels hold 1 value(s) outside -1 .. 0 (first: 5)"),
    (None, {"element_group": _set((0, 0), -2)}, "outside -1 .. 0 (first: -2)"),
    (None, {"element_group": _set((0, 3), -1)},
     "group 'ring' has the range [0, 56) but 55 element(s) labelled 0"),
    (None, {"element_volume": _set((0, 1), 0.0)}, "element_volume holds 1 value(s) <= 0"),
    (None, {"element_volume": _set((0, 1), -1.0)}, "element_volume holds 1 value(s) <= 0"),
    (None, {"element_volume": _set((0, 1), np.inf)}, "element_volume holds 1 non-finite"),
    ("stop", None, "group 'ring' has the range [0, 55) but 56 element(s) labelled 0"),
    ("name", None, "group 0 of groups_json = "),
    ("json", None, "groups_json is not valid JSON"),
])
def test_format_3_element_groups_and_volumes_are_checked(attrs, variables, match, run_dir,
                                                         tmp_path, capsys):
    """Format 3: labels in -1 .. groups - 1, group ranges that hold exactly their labels,
    volumes > 0 (or NaN), a well-formed groups_json: refused in one line although the
    checksum matches."""
    attrs = {"stop": {"groups_json": _groups(run_dir, _stop)},
             "name": {"groups_json": _groups(run_dir, lambda g: g[0].pop("name"))},
             "json": {"groups_json": "{\"groups\": ["},
             None: None}[attrs]
    # (JSON that does not parse is refused before the checksum: none to recompute)
    recompute = attrs is None or attrs["groups_json"].endswith("}")
    _refused(_forge(run_dir, tmp_path, attrs, variables, recompute=recompute), match, capsys)


def test_format_3_volumes_may_be_nan_and_missing_variables_are_refused(run_dir, tmp_path,
                                                                      capsys):
    snap = read_snapshot(run_dir / SNAP)
    assert np.isnan(snap.state["elements"]["volume"]).all()        # rings: volume not known
    assert snap.state["groups"][0]["name"] == "ring"
    _refused(_forge(run_dir, tmp_path, {"groups_json": None}), "missing groups_json", capsys)
    _refused(_forge(run_dir, tmp_path, variables={"element_group": _set((0, 0), 1)}),
             "checksum mismatch", capsys)


# -- defect 8: info escapes control characters from the file ----------------------------------
EVIL = "\x1b[2J\x1b[31mred\x1b]0;title\x07\u202eevil"


def test_info_escapes_control_characters(run_dir, tmp_path, capsys):
    attrs = {"snapshot_kind": EVIL, "device": EVIL, "vortexsim_version": EVIL,
             "history": f"line one {EVIL}\nline two\r{EVIL}"}
    path = _forge(run_dir, tmp_path, attrs, recompute=True)
    with netCDF4.Dataset(path, "a") as d:          # variable attributes: not checksummed
        d["element_x"].setncattr("long_name", EVIL)
        d["tracer_x"].setncattr("case_units", EVIL)
    capsys.readouterr()
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    for raw in ("\x1b", "\x07", "\u202e", "\r"):
        assert raw not in out
    assert out.count("\\x1b[2J\\x1b[31mred\\x1b]0;title\\x07\\u202eevil") == 7, out
    assert "\n    line two\n    \\x1b[2J" in out           # \r ends a line of the history
    # a foreign file: its names too (netCDF refuses control characters in names, not
    # Unicode format characters such as the right-to-left override)
    xr.Dataset({"v\u202e": ("d\u202e", np.arange(2.0), {"units": EVIL, "long_name": EVIL})},
               attrs={"history": EVIL}).to_netcdf(tmp_path / "foreign.nc")
    assert main(["info", str(tmp_path / "foreign.nc")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and out.count("\\x1b[2J") == 3, out
    assert "d\\u202e = 2" in out and "v\\u202e (d\\u202e)" in out


def test_messages_escape_what_they_quote(run_dir, tmp_path, capsys):
    path = _forge(run_dir, tmp_path, {"vortexsim_format": "vortexsim \x1b[31mother"})
    assert main(["restart", str(path)]) == 2
    err = capsys.readouterr().err
    assert "is a vortexsim \\x1b[31mother file, not a snapshot" in err and "\x1b" not in err
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "vortexsim \\x1b[31mother: not a vortexsim format" in out and "\x1b" not in out


# -- the helpers -------------------------------------------------------------------------------
def test_printable_and_strict_json():
    assert printable("plain text, ünïcode ok") == "plain text, ünïcode ok"
    assert printable("a\x1bb\tc\u2028d\x9b") == "a\\x1bb\\tc\\u2028d\\x9b"
    assert json_object("j", '{"a": [1, {"b": 2.5}]}') == {"a": [1, {"b": 2.5}]}
    for raw, match in [('{"a": Infinity}', "Infinity"), ('{"a": 1e400}', "float64"),
                       ('{"a": -NaN}', "not valid JSON"), ("5", "JSON number"),
                       ('"s"', "JSON string"), ("[" * 40 + "]" * 40, "nests deeper")]:
        with pytest.raises(InvalidValue, match=match):
            json_object("j", raw)


# -- defect 7 through a snapshot: a schedule that would flood the disk -----------------------
def test_restart_refuses_a_stored_schedule_beyond_the_bounds(run_dir, tmp_path, capsys):
    """A (forged) snapshot whose stored snapshot interval would write 10^5 files before
    its end: `restart` refuses it in one line, exit 2, as `run` refuses such a schedule."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    path = _forge(run_dir, tmp_path, attrs={"run_snapshot_interval": 1e-6,
                                            "run_next_snapshot": np.int64(100001)},
                  recompute=True)
    shutil.copy(path, run / SNAP)
    read_snapshot(run / SNAP)                      # whole and consistent, yet a flood
    capsys.readouterr()
    assert main(["restart", str(run / SNAP), "--out", str(tmp_path / "cont"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "snapshot" in err and "--force" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "cont").exists()


def test_restart_refuses_a_malformed_diagnostics_file_in_one_line(run_dir, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    with netCDF4.Dataset(run / "diagnostics.nc", "a") as d:
        d.renameVariable("iteration", "step")
    capsys.readouterr()
    assert main(["restart", str(run / SNAP), "-q"]) == 2
    err = capsys.readouterr().err
    assert "diagnostics.nc" in err and "Traceback" not in err \
        and len(err.strip().splitlines()) == 1, err
