"""The vortexsim command end to end (vortexsim/cli/): every case at a tiny resolution,
bitwise restart, SIGINT/SIGTERM checkpoints, refused files, bad input (exit code 2)."""
from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import xarray as xr

import vortexsim
from vortexsim.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE = ["--set", "n_phi=6", "--set", "layers=1", "--set", "tracers_per_ring=6", "--device",
        "cpu", "-q"]
TINY = [*SIZE, "--set", "plot=false"]


def _files(run_dir):
    return sorted(glob.glob(os.path.join(run_dir, "*.nc")))


def _check_outputs(run_dir):
    """Every .nc opens with xarray.open_dataset and every variable has units."""
    files = _files(run_dir)
    assert files
    for f in files:
        with xr.open_dataset(f) as ds:
            no_units = [n for n, v in ds.variables.items() if "units" not in v.attrs]
            assert not no_units, (f, no_units)
            assert "Conventions" in ds.attrs and "history" in ds.attrs
    return files


def _same_files(a, b):
    """Each .nc of run dir ``a`` equals the one of ``b``, variable by variable, bitwise."""
    names = [os.path.basename(f) for f in _files(a)]
    assert names == [os.path.basename(f) for f in _files(b)]
    for name in names:
        with xr.open_dataset(os.path.join(a, name)) as x, xr.open_dataset(os.path.join(b, name)) as y:
            assert sorted(x.variables) == sorted(y.variables)
            for v in x.variables:
                assert x[v].values.tobytes() == y[v].values.tobytes(), (name, v)
    return names


def _tiny(case):
    """TINY for the ring cases; the smallest lattice PSE allows for the lattice cases
    (taylor_green, PSE of order 4: n ≥ 13)."""
    if "n_phi" in vortexsim.cases.case_defaults(case):
        return TINY
    return ["--set", "n=13", "--set", "tracers=6", "--device", "cpu", "-q", "--set",
            "plot=false"]


@pytest.mark.parametrize("case", sorted(vortexsim.list_cases()))
def test_every_case_runs_end_to_end(case, tmp_path):
    out = tmp_path / case
    dt = vortexsim.cases.case_defaults(case)["dt"]
    rc = main(["run", case, *_tiny(case), "--set", f"t_end={4 * dt}", "--set",
               f"snapshot_interval={2 * dt}", "--set", f"diagnostics_interval={dt}",
               "--out", str(out)])
    assert rc == 0
    files = [os.path.basename(f) for f in _check_outputs(out)]
    defaults = vortexsim.cases.case_defaults(case)
    lattice = defaults["boundary"] == "periodic" and defaults["remesh_every"]
    assert files == ["diagnostics.nc"] + (["initial_field.nc"] if case ==
                                          "isotropic_turbulence" else []) + [
        "snapshot_00000000.nc", "snapshot_00000002.nc", "snapshot_00000004.nc"] + (
        ["spectra.nc"] if lattice else [])
    with xr.open_dataset(out / "snapshot_00000004.nc") as s:
        assert s.attrs["case"] == case and s.attrs["device"] == "cpu"
        assert s.attrs["precision"] == "float64" and s.attrs["kernel"] == defaults["kernel"]
        assert "tolerance" in s.attrs and "config" in s.attrs
        assert abs(float(s["t"][0]) - 4 * dt) < 1e-12
        assert s.sizes["component"] == 3 and s.sizes["tracer"] >= 6
    with xr.open_dataset(out / "diagnostics.nc") as d:
        assert list(d["iteration"].values) == [0, 1, 2, 3, 4]
        assert np.all(np.isfinite(d["energy"].values))
    # the resolved config repeats the run
    assert (out / "config.toml").is_file() and (out / "run.log").is_file()


def test_plot_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "r"
    rc = main(["run", "single_ring", *SIZE, "--steps", "2",
               "--out", str(out)])
    assert rc == 0
    assert (out / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _restart_matches_uninterrupted(tmp_path, size):
    """Uninterrupted run A; copy it and restart from a middle snapshot: every file equal,
    the diagnostics without duplicated or missing rows (adaptive dt, shortened steps)."""
    a, b = tmp_path / "a", tmp_path / "b"
    args = ["run", "leapfrog", "--set", "plot=false", "--set", "t_end=1.2", "--set",
            "adaptive=true", "--set", "courant=0.003", "--set", "snapshot_interval=0.4",
            "--set", "diagnostics_interval=0.15", *size]  # later --set values win
    assert main([*args, "--out", str(a)]) == 0
    shutil.copytree(a, b)
    snaps = sorted(glob.glob(str(b / "snapshot_*.nc")))
    assert len(snaps) == 4
    middle = snaps[1]
    with xr.open_dataset(a / "diagnostics.nc") as d:
        ref_iter = list(d["iteration"].values)
        dts = d["dt_next"].values
    assert np.all(dts < 0.1) and len(set(dts.tolist())) > 3  # the adaptive dt is active
    assert len(ref_iter) == len(set(ref_iter)) == 9  # t = 0, 0.15, ..., 1.05, 1.2
    # in place, dropping the later output (the default would branch: test_run_history.py)
    assert main(["restart", middle, "--truncate", "-q"]) == 0
    names = _same_files(a, b)
    assert "diagnostics.nc" in names
    with xr.open_dataset(b / "diagnostics.nc") as d:
        assert list(d["iteration"].values) == ref_iter
        assert "restart" in d.attrs["history"]
    return snaps


def test_restart_is_bitwise_identical_and_diagnostics_continue(tmp_path):
    snaps = _restart_matches_uninterrupted(tmp_path, SIZE)
    # continue past the end: --t-end extends the run; without it, the run is complete
    assert main(["restart", snaps[-1], "--t-end", "1.5", "-q"]) == 0
    assert main(["restart", snaps[-1], "-q"]) == 2


def test_own_case_file_works_like_a_name(tmp_path, monkeypatch):
    """A user's TOML with a few keys: the rest are the case's defaults; default output
    directory runs/<file stem> in the working directory."""
    mine = tmp_path / "my ring.toml"
    mine.write_text('case = "single_ring"   # mine\n[discretization]\nn_phi = 6\nlayers = 1\n'
                    '[tracers]\ntracers_per_ring = 4\n[time]\nt_end = 0.1\n'
                    '[output]\nplot = false\n')
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(mine), "--device", "cpu", "-q"]) == 0
    out = tmp_path / "runs" / "my ring"
    _check_outputs(out)
    with xr.open_dataset(out / "snapshot_00000002.nc") as ds:
        assert ds.sizes["element"] == 6 and ds.sizes["tracer"] == 4
        assert 'radius = 1.0' in ds.attrs["config"] and ds.attrs["case"] == "single_ring"


def test_resolved_config_repeats_the_run(tmp_path):
    """config.toml of a run (every resolved value) reproduces it bitwise."""
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["run", "oblique_collision", *TINY, "--set", "angle=30", "--set", "dt=0.07",
                 "--t-end", "0.3", "--out", str(a)]) == 0
    assert main(["run", str(a / "config.toml"), "-q", "--out", str(b)]) == 0
    assert _same_files(a, b) == ["diagnostics.nc", "snapshot_00000000.nc",
                                 "snapshot_00000006.nc"]  # steps shortened at t = 0.1, 0.2


def test_last_snapshot_restarts_when_the_end_is_no_diagnostics_time(tmp_path):
    """t_end = 0.4 is a snapshot time but not a diagnostics time: the final row comes after
    the scheduled snapshot, which is then rewritten so that its row count holds."""
    out = tmp_path / "r"
    assert main(["run", "single_ring", *TINY, "--t-end", "0.4", "--set",
                 "snapshot_interval=0.2", "--set", "diagnostics_interval=0.15",
                 "--out", str(out)]) == 0
    last = out / "snapshot_00000008.nc"
    with xr.open_dataset(last) as ds, xr.open_dataset(out / "diagnostics.nc") as d:
        assert ds.attrs["run_diagnostics_rows"] == d.sizes["t"] == 4
    assert main(["restart", str(last), "--t-end", "0.5", "-q"]) == 0
    with xr.open_dataset(out / "diagnostics.nc") as d:
        assert list(d["iteration"].values) == [0, 3, 6, 8, 9, 10]


@pytest.mark.gpu
def test_restart_is_bitwise_identical_on_the_gpu(tmp_path):
    """The same check on the GPU with the FMM (2 x 512 x 7 elements, 2^16 tracers);
    `python -m pytest -m gpu tests/test_cli.py` on a GPU machine."""
    _restart_matches_uninterrupted(tmp_path, [
        "--device", "gpu", "--set", "method=fmm", "--set", "n_phi=512",
        "--set", "tracers_per_ring=32768", "--set", "courant=0.5", "-q"])


def _run_until_snapshots(args, out, n_files, timeout=60):
    env = {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "vortexsim", *args, "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + timeout
    while len(glob.glob(str(out / "snapshot_*.nc"))) < n_files:
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "no snapshots written"
        time.sleep(0.05)
    return proc


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_leaves_a_restartable_checkpoint(sig, tmp_path):
    """SIGINT/SIGTERM to a running `vortexsim run`: exit 128+sig after a checkpoint of the
    last completed step; restarting it gives bitwise the uninterrupted run."""
    run = ["run", "leapfrog", *TINY, "--set", "t_end=1000", "--set", "snapshot_interval=0.5",
           "--set", "diagnostics_interval=0.25"]
    out = tmp_path / "run"
    proc = _run_until_snapshots(run, out, 2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert "vortexsim restart" in err and "Traceback" not in err
    checkpoint = re.search(r"checkpoint written: (\S+)\.", err).group(1)
    assert os.path.isfile(checkpoint)
    with xr.open_dataset(checkpoint) as ds:
        assert ds.attrs["snapshot_kind"] == "interrupted"
        k = int(ds["iteration"].values[0])
    assert k >= 5
    assert main(["restart", checkpoint, "--steps", "3", "-q"]) == 0
    ref = tmp_path / "ref"
    assert main([*run, "--steps", str(k + 3), "--out", str(ref)]) == 0
    last = f"snapshot_{k + 3:08d}.nc"
    with xr.open_dataset(out / last) as x, xr.open_dataset(ref / last) as y:
        for v in ("element_x", "element_alpha", "element_sigma", "tracer_x", "t", "dt_next"):
            assert x[v].values.tobytes() == y[v].values.tobytes(), v
    with xr.open_dataset(out / "diagnostics.nc") as x, xr.open_dataset(ref / "diagnostics.nc") as y:
        assert x["iteration"].values.tolist() == y["iteration"].values.tolist()
        assert x["energy"].values.tobytes() == y["energy"].values.tobytes()


def test_blow_up_writes_the_last_good_state(tmp_path, capsys):
    out = tmp_path / "r"
    rc = main(["run", "single_ring", *TINY, "--set", "max_speed=1e-6", "--out", str(out)])
    assert rc == 1
    err = capsys.readouterr().err
    assert "last good state" in err and "Traceback" not in err
    with xr.open_dataset(out / "snapshot_00000000.nc") as ds:
        assert ds.attrs["snapshot_kind"] == "last_good_state"


def test_output_directory_is_never_overwritten(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "single_ring", *TINY, "--steps", "1", "--out", str(out)]) == 0
    before = {f: open(f, "rb").read() for f in _files(out)}
    assert main(["run", "single_ring", *TINY, "--steps", "2", "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert {f: open(f, "rb").read() for f in _files(out)} == before
    (out / "notes.txt").write_text("mine")
    assert main(["run", "single_ring", *TINY, "--steps", "2", "--overwrite",
                 "--out", str(out)]) == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert [os.path.basename(f) for f in _files(out)] == [
        "diagnostics.nc", "snapshot_00000000.nc", "snapshot_00000002.nc"]


def test_restart_refuses_truncated_and_foreign_files(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "single_ring", *TINY, "--steps", "2", "--out", str(out)]) == 0
    snap = out / "snapshot_00000000.nc"
    data = snap.read_bytes()
    (tmp_path / "trunc.nc").write_bytes(data[: len(data) * 2 // 3])
    xr.Dataset({"temperature": ("x", np.arange(3.0), {"units": "K"})}).to_netcdf(
        tmp_path / "foreign.nc")
    for path, match in [(tmp_path / "trunc.nc", "truncated"), (tmp_path / "foreign.nc", "foreign"),
                        (out / "diagnostics.nc", "not a snapshot"),
                        (tmp_path / "none.nc", "does not exist")]:
        capsys.readouterr()
        assert main(["restart", str(path)]) == 2
        err = capsys.readouterr().err
        assert match in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("args, match", [
    (["run", "leapfrg"], "unknown case 'leapfrg' (did you mean 'leapfrog'?)"),
    (["run", "leapfrog", "--set", "n_ph=4"], "did you mean 'n_phi'"),
    (["run", "{toml}"], "did you mean 'n_phi'"),
    (["run", "leapfrog", "--set", "dt=0.1s"], "must be a number"),
    (["run", "leapfrog", "--set", "n_phi=ten"], "must be a number"),
    (["run", "leapfrog", "--set", "adaptive=3"], "true or false"),
    (["run", "leapfrog", "--set", "n_phi=0"], "n_phi must be > 0"),
    (["run", "leapfrog", "--set", "tracers_per_ring=-2"], ">= 0"),
    (["run", "leapfrog", "--set", "dt=0"], "dt must be > 0"),
    (["run", "leapfrog", "--set", "sigma=-0.1"], "sigma must be > 0"),
    (["run", "leapfrog", "--set", "kernel=gausian"], "Did you mean 'gaussian'"),
    (["run", "leapfrog", "--t-end", "0"], "t_end must be > 0"),
    (["run", "leapfrog", "--t-end", "-1"], "t_end must be > 0"),
    (["run", "leapfrog", "--steps", "0"], "--steps"),
    (["run", "leapfrog", "--device", "tpu"], "invalid choice"),
    (["run", "leapfrog", "--t-end", "1", "--steps", "2"], "not allowed"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_exits_2_with_one_line(args, match, tmp_path, capsys):
    toml = tmp_path / "mine.toml"
    toml.write_text('case = "leapfrog"\n[discretization]\nnphi = 8\n')
    args = [a.replace("{toml}", str(toml)) for a in args]
    rc = main([*args, "--out", str(tmp_path / "out")] if args[0] == "run" else args)
    assert rc == 2
    err = capsys.readouterr().err
    assert match in err, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_bad_restart_end_exits_2(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "single_ring", *TINY, "--t-end", "0.1", "--set",
                 "snapshot_interval=0.05", "--out", str(out)]) == 0
    assert main(["restart", str(out / "snapshot_00000001.nc"), "--t-end", "0.01"]) == 2
    assert "not after" in capsys.readouterr().err


def test_gpu_without_gpu_exits_2(tmp_path, capsys):
    from vortexsim.backend import gpu_available
    if gpu_available():
        pytest.skip("a GPU is present")
    assert main(["run", "leapfrog", "--device", "gpu", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "gpu" in err.lower() and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_cases_name_lists_its_parameters_with_units(capsys):
    """`vortexsim cases NAME`: the case file's values, units and meanings of the table."""
    from vortexsim.config import PARAMETER_TABLE
    assert main(["cases", "leapfrog"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("spacing ="))
    assert "[L]" in line and PARAMETER_TABLE["spacing"].help in line
    dt = next(ln for ln in out.splitlines() if ln.strip().startswith("dt ="))
    assert "0.1" in dt and "[T]" in dt                  # leapfrog.toml's dt
    assert "[physics]" in out and "[output]" in out and 'viscous = "core_spreading"' in out
    assert main(["cases", "no_such_case"]) == 2
    assert "unknown case 'no_such_case'" in capsys.readouterr().err


def test_cases_info_help_and_module_entry_point(tmp_path, capsys):
    assert main(["cases"]) == 0
    out = capsys.readouterr().out
    for case in vortexsim.list_cases():
        assert case in out
    run = tmp_path / "r"
    assert main(["run", "single_ring", *TINY, "--steps", "1", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["info", str(run / "snapshot_00000001.nc")]) == 0
    out = capsys.readouterr().out
    assert "iteration 1" in out and "checksum ok" in out and "[L^3/T]" in out
    assert main(["info", str(run / "diagnostics.nc")]) == 0
    assert "2 rows" in capsys.readouterr().out
    env = {**os.environ, "PYTHONPATH": REPO}
    help_text = subprocess.run([sys.executable, "-m", "vortexsim", "run", "--help"],
                               capture_output=True, text=True, env=env, check=True).stdout
    for option in ("--set", "--out", "--device", "--precision", "--t-end", "--steps",
                   "--overwrite", "--quiet", "--verbose"):
        assert option in help_text


def test_presets_dry_run_and_listing(tmp_path, capsys):
    """--preset gpu resolves the documented GPU size of every ring case (dry run, no
    state built); --set still wins; a user's case file defines its own presets."""
    from vortexsim.config import load_case_file
    ring_cases = [c for c in vortexsim.list_cases()
                  if "n_phi" in vortexsim.cases.case_defaults(c)]
    for case in ring_cases:
        assert main(["run", case, "--preset", "gpu", "--dry-run", "--set", "seed=3"]) == 0
        text = capsys.readouterr().out
        path = tmp_path / f"{case}.toml"
        path.write_text(text)
        name, params = load_case_file(path)            # the printout is a case file
        assert name == case and params["layers"] == 7 and params["method"] == "fmm"
        rings = 1 if case in ("single_ring", "ring_ground") else 2
        assert rings * params["n_phi"] * 127 == 32766
        assert rings * params["tracers_per_ring"] == 1 << 20 and params["seed"] == 3
    assert main(["cases"]) == 0
    assert capsys.readouterr().out.count("--preset gpu: n_phi=") == len(ring_cases)
    own = tmp_path / "own.toml"
    own.write_text('case = "single_ring"\n[presets.small]\nn_phi = 7\n')
    assert main(["run", str(own), "--preset", "small", "--dry-run"]) == 0
    assert "n_phi = 7" in capsys.readouterr().out
    assert main(["run", str(own), "--preset", "smal", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "no preset 'smal'" in err and "small" in err
    assert main(["run", "leapfrog", "--preset", "gpu", "--set", "n_phi=0", "--dry-run"]) == 2


def test_run_log_and_info_state_the_cores(tmp_path, capsys):
    """The log and `info` give σ_c, σ and σ_eff; a σ above σ_c is a warning."""
    run = tmp_path / "r"
    assert main(["run", "single_ring", *TINY, "--steps", "1", "--out", str(run)]) == 0
    log = (run / "run.log").read_text()
    # n_phi = 6, one layer: sigma = 2 pi / 6 = 1.047 > core 0.1, not resolved
    assert "WARNING" in log and "physical sigma_c = 0.1, element sigma = 1.047" in log
    assert "effective sqrt(sigma_c^2 + sigma^2) = 1.052" in log and "not resolved" in log
    # the set-up outside the run's own time line: the case's build and its files
    assert re.search(r"set-up: the case built in [0-9.e+-]+ s, its files written in "
                     r"[0-9.e+-]+ s", log)
    capsys.readouterr()
    assert main(["info", str(run / "snapshot_00000001.nc")]) == 0
    assert "cores: physical sigma_c = 0.1" in capsys.readouterr().out
    fine = tmp_path / "f"
    assert main(["run", "single_ring", *TINY, "--set", "sigma=0.05", "--steps", "1", "--out",
                 str(fine)]) == 0
    log = (fine / "run.log").read_text()
    assert "element sigma = 0.05" in log and "not resolved" not in log


@pytest.mark.parametrize("command", [["analyze"], ["plot"], ["render"], ["export", "--xdmf"]])
def test_run_directory_tools_refuse_a_directory_that_is_not_a_run(command, tmp_path, capsys):
    """The commands of COMMAND_MODULES are wired into the parser: on a directory that
    vortexsim did not write each ends with one line and exit code 2."""
    assert main([*command, str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vortexsim: error:"), err


def test_logging_options_before_the_command(tmp_path, capsys):
    """``vortexsim -qq run ...``: the logging options are taken before the command as after
    it (the run's INFO lines go, its result stays)."""
    from vortexsim.cli.command import main
    args = ["run", "taylor_green", "--set", "n=8", "--steps", "1", "--out"]
    assert main(args + [str(tmp_path / "loud")]) == 0
    assert "INFO" in capsys.readouterr().err
    assert main(["-qq"] + args + [str(tmp_path / "quiet")]) == 0
    assert "INFO" not in capsys.readouterr().err
    assert (tmp_path / "quiet" / "diagnostics.nc").exists()
    assert main(["-v", "cases"]) == 0



def test_two_stop_criteria_are_explained(tmp_path, capsys):
    """``--set t_end=4 --steps 3``: the run stops after the three steps and says so, with
    t_end kept as the run's configured end (where a restart continues to)."""
    from vortexsim.cli.command import main
    out = tmp_path / "run"
    assert main(["run", "taylor_green", "--set", "n=8", "--set", "t_end=4", "--steps", "3",
                 "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "--steps 3 ends this run (at t = 0.3 with dt = 0.1); t_end = 4 stays" in err
