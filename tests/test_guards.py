"""Guards of `vortexsim run` (issue 19, defects 3, 4, 5, 7, 8): --overwrite replaces only
a run directory, memory estimated before anything is allocated, hostile case files,
schedules that would never end or flood the disk, one line (no traceback) for a full disk,
an unwritable directory, a Ctrl-C while starting and SIGTERM after the last step.

vortexsim/cli/resources.py, vortexsim/config.py, vortexsim/cli/, vortexsim/cli/startup.py."""
from __future__ import annotations

import errno
import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import vortexsim
import vortexsim.output.writers as writers
import vortexsim.cli.resources as resources
from vortexsim.cli import RUN_MARKER, main
from vortexsim.config import MAX_CASE_FILE_BYTES, ConfigError, load_case_file, parse_assignments
from vortexsim.cli.resources import ResourceError, check_disk, check_resources, check_schedule

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = ["--set", "n_phi=6", "--set", "layers=1", "--set", "tracers_per_ring=4", "--device",
        "cpu", "-q", "--set", "plot=false"]


def _one_line(capsys, match):
    err = capsys.readouterr().err
    assert match in err, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _bad_run(args, tmp_path, capsys, match):
    """`vortexsim run ...` exits 2 with one line containing ``match``, writing nothing."""
    out = tmp_path / "out"
    assert main(["run", *args, "--out", str(out)]) == 2
    assert not out.exists()
    return _one_line(capsys, match)


# -- defect 3: --overwrite replaces only a directory that vortexsim wrote -------------------
def test_overwrite_refuses_a_directory_vortexsim_did_not_write(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    names = ["config.toml", "run.log", "plot.png", "diagnostics.nc", "snapshot_00000001.nc",
             "notes.txt"]
    for name in names:
        (mine / name).write_text(f"the user's {name}")
    for marker in (None, "not json", json.dumps([1, 2]), "link"):
        if marker == "link":
            (mine / RUN_MARKER).unlink()
            (mine / RUN_MARKER).symlink_to(tmp_path / "elsewhere.json")
            (tmp_path / "elsewhere.json").write_text('{"vortexsim_run": 1}')
        elif marker is not None:
            (mine / RUN_MARKER).write_text(marker)
        capsys.readouterr()
        assert main(["run", "single_ring", *TINY, "--steps", "1", "--overwrite",
                     "--out", str(mine)]) == 2
        _one_line(capsys, "is not a run directory of vortexsim")
        for name in names:
            assert (mine / name).read_text() == f"the user's {name}"


def test_a_run_directory_is_marked_and_overwritten(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "single_ring", *TINY, "--steps", "1", "--out", str(out)]) == 0
    marker = json.loads((out / RUN_MARKER).read_text())
    assert marker["vortexsim_run"] == 1 and marker["vortexsim_version"] == vortexsim.__version__
    (out / "notes.txt").write_text("mine")
    assert main(["run", "single_ring", *TINY, "--steps", "2", "--overwrite",
                 "--out", str(out)]) == 0
    assert (out / "notes.txt").read_text() == "mine"
    assert json.loads((out / RUN_MARKER).read_text()) == marker
    assert sorted(os.path.basename(f) for f in glob.glob(str(out / "*.nc"))) == [
        "diagnostics.nc", "snapshot_00000000.nc", "snapshot_00000002.nc"]


# -- defect 4: memory estimated before allocating; hostile case files -------------------------
@pytest.mark.parametrize("case", sorted(vortexsim.list_cases()))
def test_problem_size_is_what_the_case_builds(case):
    """The estimate's sizes (from the case at its smallest size, scaled; a lattice case's
    own count) equal the sizes of the built case, for every case, several layers, a
    ground plane's images."""
    if "n_phi" not in vortexsim.cases.case_defaults(case):           # a lattice case
        sim = vortexsim.make_case(case, n=13, tracers=5, device="cpu", progress=False)
        assert resources.problem_size({"case": case, "n": 13, "tracers": 5}) == (
            len(sim.elements), len(sim.tracers), len(sim.elements)) == (2197, 5, 2197)
        return
    params = {"n_phi": 7, "layers": 3, "tracers_per_ring": 5}
    sim = vortexsim.make_case(case, **params, device="cpu", progress=False)
    n, m, sources = resources.problem_size({"case": case, **params})
    assert (n, m) == (sim.config["n_elements"], sim.config["n_tracers"]) == (len(sim.elements),
                                                                           len(sim.tracers))
    assert sources == n * (2 if sim.config["boundary"] == "ground" else 1)
    assert resources.problem_size({"case": case, "n_phi": 7, "layers": 1, "core": 0.1,
                                   "tracers_per_ring": 0})[:2] == (
        7 * (2 if case in ("leapfrog", "collision", "oblique_collision") else 1), 0)


@pytest.mark.parametrize("args, match", [
    (["--set", "n_phi=1e9"], "1 TB of memory (1,000,000,000 elements"),
    (["--set", "n_phi=1e9", "--set", "layers=2"], "7,000,000,000 elements"),
    (["--set", "layers=1000000000"], "of memory"),
    (["--set", "tracers_per_ring=1e12"], "1,000,000,000,000 tracers"),
    (["--max-memory", "1MB"], "--max-memory is 1 MB"),
])
def test_a_run_that_does_not_fit_in_memory_is_refused(args, match, tmp_path, capsys):
    _bad_run(["single_ring", *TINY, *args], tmp_path, capsys, match)


def test_check_resources_on_the_gpu_and_with_a_bound(monkeypatch):
    config = {"case": "leapfrog", "n_phi": 2341, "layers": 2, "tracers_per_ring": 1 << 19,
              "method": "fmm"}
    monkeypatch.setattr(resources, "available_memory", lambda device: (64 * 10 ** 9, 8 * 10 ** 9))
    est = check_resources(config, "gpu")        # the documented GPU size fits
    assert est.device == "gpu" and est.n_elements == 2 * 2341 * 7
    assert est.n_tracers == 1 << 20 and 0 < est.device_bytes < 8 * 10 ** 9
    with pytest.raises(ResourceError, match="GPU memory .* but the GPU has 8 GB available"):
        check_resources({**config, "tracers_per_ring": 1 << 24}, "gpu")
    with pytest.raises(ResourceError, match="--max-memory is 100 MB"):
        check_resources(config, "cpu", max_memory=10 ** 8)
    assert check_resources({"case": "single_ring", "n_phi": 2.5}, "cpu") is None  # make_case says
    assert resources.parse_size("16GiB") == 16 << 30 and resources.parse_size("8 GB") == 8e9
    for bad in ("8XB", "-1GB", "0", "GB"):
        with pytest.raises(ValueError):
            resources.parse_size(bad)


def test_the_spectral_sum_s_memory_follows_its_fine_grid():
    """Periodic lattice cases: 2 kB per element plus 64 B per point of the NUFFT's fine
    grid ((2 (2 m_max + 1))³ rounded up to a 2-3-5 size; m_max from σ = h, tol and the
    kernel's order): 128³ gaussian6 fits an 80 GB GPU, 256³ needs an H200's ~140 GB."""
    import math

    from vortexsim.kernels.nufft import fine_grid_size, kernel_width
    from vortexsim.summation.spectral import spectral_modes
    config = {"case": "isotropic_turbulence", "n": 128, "method": "spectral",
              "boundary": "periodic", "box": 2 * math.pi, "kernel": "gaussian6", "tol": 1e-6}
    est = resources.estimate_memory(config, "gpu")
    grid = fine_grid_size(spectral_modes(2 * math.pi, 2 * math.pi / 128, 1e-6, 6),
                          kernel_width(1e-7))
    assert est.device_bytes == resources._FIXED_GPU + 2_000 * 128 ** 3 + 64 * grid ** 3
    assert 10e9 < est.device_bytes < 20e9
    big = resources.estimate_memory({**config, "n": 256}, "gpu").device_bytes
    assert 100e9 < big < 140e9
    gauss = resources.estimate_memory({**config, "n": 256, "kernel": "gaussian"}, "gpu")
    assert gauss.device_bytes < big                      # the Gaussian's series is shorter
    auto = resources.estimate_memory({**config, "method": "auto"}, "gpu")
    assert auto.device_bytes == est.device_bytes


def test_restart_checks_the_stored_config_s_memory(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "single_ring", *TINY, "--steps", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["restart", str(out / "snapshot_00000001.nc"), "--steps", "1",
                 "--max-memory", "1MB"]) == 2
    _one_line(capsys, "--max-memory is 1 MB")


def test_hostile_case_files_are_refused_before_they_are_parsed(tmp_path, capsys):
    big = tmp_path / "big.toml"
    big.write_bytes(b'case = "single_ring"\n' + b"#" * MAX_CASE_FILE_BYTES + b"\n")
    deep = tmp_path / "deep.toml"
    deep.write_text('case = "single_ring"\nx = ' + "[" * 5000 + "]" * 5000 + "\n")
    deep_tables = tmp_path / "deep_tables.toml"
    deep_tables.write_text('case = "single_ring"\nx = ' + "{a = " * 5000 + "1" + "}" * 5000)
    five = tmp_path / "five.toml"
    five.write_text("case = 5\n")
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)           # opening it would block: refused by its type first
    for path, match in [("/dev/zero", "not a regular file"), (fifo, "not a regular file"),
                        (tmp_path, "is a directory"), (big, "more than a case file can have"),
                        (deep, "nested too deeply"), (deep_tables, "nested too deeply"),
                        (five, "case must be a string naming the case builder, e.g. "
                               'case = "single_ring" (vortexsim cases lists them), got 5')]:
        _bad_run([str(path)], tmp_path, capsys, match)
    _bad_run(["single_ring", "--set", "x=" + "[" * 5000], tmp_path, capsys, "nested too deeply")
    with pytest.raises(ConfigError, match="missing top-level key case"):
        (tmp_path / "none.toml").write_text("[physics]\nradius = 1.0\n")
        load_case_file(tmp_path / "none.toml")
    assert parse_assignments(["n_phi=[1, [2]]"]) == {"n_phi": [1, [2]]}


# -- defect 7: schedules that never end or flood the disk; a run that takes no step ---------
@pytest.mark.parametrize("args, match", [
    (["--set", "dt=1e-12"], "5e+12 steps"),
    (["--set", "snapshot_interval=1e-12"], "raise the output intervals"),
    (["--set", "snapshot_interval=1e-4"], "5e+04 snapshot files"),
    (["--set", "diagnostics_interval=1e-5"], "5e+05 diagnostics rows"),
    (["--set", "t_end=1e6"], "2e+07 steps"),
    (["--steps", "20000000"], "lower --steps, or pass --force"),
    # the largest t_end and intervals and the smallest dt of the table's ranges
    (["--set", "t_end=1e12", "--set", "dt=1e-12"], "more than a run can count"),  # defect 5
    (["--set", "t_end=1e12", "--set", "dt=1e-12", "--set", "snapshot_interval=auto",
      "--set", "diagnostics_interval=auto"], "t_end 1e+12 is about 1e+24 steps"),
    (["--set", "t_end=1e12", "--set", "dt=1e-12", "--set", "snapshot_interval=auto",
      "--steps", "5"], "the automatic output intervals are derived from it"),
    (["--set", "snapshot_interval=1e12", "--set", "dt=1e-12", "--set",
      "diagnostics_interval=auto"], "too many to derive the automatic diagnostics_interval"),
    (["--set", "t_end=1e308"], "t_end must be a number > 0, from 1e-12 to 1e+12"),
    (["--steps", "99999999999999999999999"], "argument --steps: must be from 1 to"),
    (["--steps", "-3"], "argument --steps"),
    (["--t-end", "1e-12"], "the run would take no step"),
])
def test_schedules_beyond_the_bounds_are_refused(args, match, tmp_path, capsys):
    err = _bad_run(["single_ring", *TINY, *args], tmp_path, capsys, match)
    if "more than 1" in err:          # a bound that --force lifts says so
        assert "--force" in err


def test_force_lifts_the_bounds_but_not_the_hard_limit():
    args = dict(dt=0.05, duration=5.0, snapshot_interval=1e-4)
    with pytest.raises(ResourceError, match="--force"):
        check_schedule(**args)
    plan = check_schedule(**args, force=True)
    assert plan["snapshots"] == pytest.approx(5e4 + 2) and plan["steps"] == pytest.approx(5e4)
    with pytest.raises(ResourceError, match="more than a run can count"):
        check_schedule(dt=1e-300, duration=5.0, force=True)
    auto = check_schedule(dt=0.05, duration=5.0)
    assert (auto["snapshot_interval"], auto["diagnostics_interval"]) == \
        writers.output_intervals(0.05, 5.0)
    assert check_schedule(dt=0.05, duration=5.0, steps=3, snapshot_interval=1e-9)["snapshots"] == 5


def test_files_that_would_not_fit_on_the_disk_are_refused(tmp_path, capsys, monkeypatch):
    usage = resources.shutil.disk_usage(tmp_path)
    monkeypatch.setattr(resources.shutil, "disk_usage",
                        lambda path: usage._replace(free=100_000))
    _bad_run(["single_ring", *TINY, "--steps", "2"], tmp_path, capsys, "100 kB free")
    with pytest.raises(ResourceError, match="disk of"):
        check_disk(tmp_path / "a" / "b", 10, 10, 3, 10)
    assert check_disk(tmp_path / "a", 10, 10, 3, 10, force=True) > 100_000
    assert main(["run", "single_ring", *TINY, "--steps", "1", "--force",
                 "--out", str(tmp_path / "forced")]) == 0


def test_a_restart_that_takes_no_step_says_so(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", "single_ring", *TINY, "--t-end", "0.1", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["restart", str(out / "snapshot_00000002.nc"), "--t-end", "0.1000000000001",
                 "-qq"]) == 0
    _one_line(capsys, "the run took no step: it starts at t = 0.1 (iteration 2)")


# -- defect 5: one line instead of a traceback ------------------------------------------------
@pytest.mark.parametrize("failure", ["enospc", "hdf"])
def test_a_full_disk_ends_the_run_with_one_line(failure, tmp_path, capsys, monkeypatch):
    """A snapshot write that fails on the output thread (a full disk: ENOSPC, or netCDF's
    "HDF error") ends the run with exit 1, one line naming the disk, the traceback in
    run.log; the snapshots before it stay."""
    real, calls = writers.write_snapshot, []

    def write_snapshot(path, *args, **kwargs):
        calls.append(path)
        if len(calls) >= 2:
            if failure == "hdf":
                raise RuntimeError("NetCDF: HDF error")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(writers, "write_snapshot", write_snapshot)
    out = tmp_path / "r"
    assert main(["run", "single_ring", *TINY, "-q", "--steps", "4", "--set",
                 "snapshot_interval=0.05", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("vortexsim: error: writing the run's files failed") and \
        ("the disk is full" if failure == "enospc" else "full disk") in line, err
    assert "snapshot_00000000.nc" in line and "the traceback is in" in line
    assert "Traceback" in (out / "run.log").read_text()
    assert os.path.isfile(out / "snapshot_00000000.nc")


def test_a_full_disk_that_also_stops_run_log_is_one_line(tmp_path, capsys, monkeypatch):
    """On a full disk run.log fails too: no "--- Logging error ---" tracebacks on stderr,
    and the line says that run.log could not be written."""
    from vortexsim.cli import log as cli_log

    def full(self, record):
        self.handleError(record)       # what logging does when the write raises

    def write_snapshot(path, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    monkeypatch.setattr(cli_log.RunLog, "emit", full)
    monkeypatch.setattr(writers, "write_snapshot", write_snapshot)
    assert main(["run", "single_ring", *TINY, "-qq", "--steps", "2", "--out",
                 str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Logging error" not in err, err
    line = err.strip().splitlines()[-1]
    assert "the disk is full" in line and "no snapshot was written" in line
    assert "run.log could not be written either" in line


def test_an_unwritable_output_directory_is_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "file").write_text("x")
    assert main(["run", "single_ring", *TINY, "--steps", "1", "--out",
                 str(tmp_path / "file" / "sub")]) == 2
    _one_line(capsys, "cannot write into the output directory")
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() != 0:           # root writes into a read-only directory: simulate it
        ro.chmod(0o500)
    else:
        real = os.makedirs

        def makedirs(path, *args, **kwargs):
            if str(path).startswith(str(ro)):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real(path, *args, **kwargs)
        monkeypatch.setattr(os, "makedirs", makedirs)
    try:
        assert main(["run", "single_ring", *TINY, "--steps", "1", "--out",
                     str(ro / "sub")]) == 2
        _one_line(capsys, "Permission denied")
    finally:
        ro.chmod(0o700)


def test_restart_in_a_read_only_run_directory_is_one_line(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r"
    assert main(["run", "single_ring", *TINY, "--steps", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    if os.geteuid() != 0:
        out.chmod(0o500)
        (out / "run.log").chmod(0o400)
    else:
        from vortexsim.cli import log as cli_log

        def run_log(path, *args, **kwargs):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        monkeypatch.setattr(cli_log, "RunLog", run_log)
    try:
        assert main(["restart", str(out / "snapshot_00000001.nc"), "--steps", "1"]) == 2
        _one_line(capsys, "Permission denied")
    finally:
        out.chmod(0o700)
        (out / "run.log").chmod(0o600)


def _env():
    return {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_ctrl_c_while_starting_is_one_line_and_130(tmp_path):
    """SIGINT while `python -m vortexsim` imports (before its handlers exist): the start-up
    hook of vortexsim/cli/startup.py; sent once NumPy is being loaded (after the hook)."""
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("needs /proc to see the child's imports")
    for delay in (0.0, 0.2):
        # a run long enough that the signal never comes after its end
        proc = subprocess.Popen([sys.executable, "-m", "vortexsim", "run", "single_ring",
                                 *TINY, "-qq", "--set", "t_end=1000", "--out",
                                 str(tmp_path / f"o{delay}")],
                                stderr=subprocess.PIPE, text=True, env=_env())
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with open(f"/proc/{proc.pid}/maps") as fh:
                    if "numpy" in fh.read():
                        break
            except OSError:
                pass
            time.sleep(0.002)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "Traceback" not in err and err.count("\n") == 1, err


def test_the_startup_hook_is_only_for_the_command():
    from vortexsim.cli.startup import is_command
    assert is_command(["/usr/bin/vortexsim", "run"], [])
    assert is_command(["-m", "run"], ["python", "-m", "vortexsim", "run"])
    assert not is_command(["-m"], ["python", "-m", "pytest"])
    assert not is_command(["script.py"], ["python", "script.py", "-m", "vortexsim"])
    assert not getattr(sys.excepthook, "_vortexsim_startup", False)   # pytest imported it


# -- defect 8: SIGTERM after the last step; SIGTERM outside a run -----------------------------
def test_sigterm_during_the_final_plot_is_said(tmp_path, capsys, monkeypatch):
    """SIGTERM while the final plot is drawn (on the main thread, beside the final
    snapshot's write): the run is complete (the plot too); one line says so, exit 143
    (a signal ends the command with 128 + signal whatever the phase)."""
    def plot_rows(rows, x, y, t, title, path):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)                    # the handler runs on the main thread meanwhile
        with open(path, "wb") as fh:
            fh.write(b"png")
        return path

    monkeypatch.setattr(writers, "plot_rows", plot_rows)
    out = tmp_path / "r"
    assert main(["run", "single_ring", *TINY[:-2], "-qq", "--steps", "2", "--out",
                 str(out)]) == 143
    _one_line(capsys, "SIGTERM came after the run's last step; the run is complete (t = 0.1, "
                      "iteration 2")
    assert (out / "plot.png").read_bytes() == b"png"


def test_sigterm_outside_a_run_is_one_line_and_143(tmp_path, capsys, monkeypatch):
    import vortexsim.cases as cases

    def make_case(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
        raise AssertionError("SIGTERM was not delivered")

    monkeypatch.setattr(cases, "make_case", make_case)
    before = signal.getsignal(signal.SIGTERM)
    assert main(["run", "single_ring", *TINY, "--steps", "1", "--out", str(tmp_path / "o")]) \
        == 143
    _one_line(capsys, "terminated by SIGTERM")
    assert signal.getsignal(signal.SIGTERM) is before


def test_an_inherited_ignored_sigint_stays_ignored_and_sigterm_stops(tmp_path):
    """`vortexsim run ... &` in a script (no job control) starts with SIGINT ignored: the
    terminal's Ctrl-C is not for it, so it keeps running; SIGTERM still checkpoints."""
    out = tmp_path / "bg"
    proc = subprocess.Popen([sys.executable, "-m", "vortexsim", "run", "single_ring", *TINY,
                             "--set", "t_end=100", "--set", "snapshot_interval=0.1",
                             "--out", str(out)],
                            stderr=subprocess.PIPE, text=True, env=_env(),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.time() + 60
    while len(list(out.glob("snapshot_*.nc"))) < 2:
        assert proc.poll() is None and time.time() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert proc.poll() is None                     # ignored
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "checkpoint written" in err, err


def test_the_disk_check_counts_the_files_of_a_split_states_snapshots(tmp_path, monkeypatch):
    """A periodic mesh run split by slabs whose whole state goes to rank 0's files for
    its snapshots (backend.spill.should_spill): those files count against the disk, 48
    B a node kept and 24 B for each whole state in flight (the one being put together
    and the output thread's pending ones); nothing where the state is not split or
    stays in memory."""
    from vortexsim.backend import spill
    from vortexsim.cases import case_defaults
    from vortexsim.simulation.output_thread import MAX_PENDING
    config = {"case": "isotropic_turbulence", **case_defaults("isotropic_turbulence"),
              "n": 64}
    monkeypatch.setattr(spill, "should_spill",
                        lambda nbytes, reserved=0: nbytes == 72 * 64 ** 3)
    want = (48 + 24 * (1 + MAX_PENDING)) * 64 ** 3
    assert resources.spill_bytes(config, 4) == want
    assert resources.spill_bytes(config, 1) == 0                  # one rank: not split
    assert resources.spill_bytes({**config, "tracers": 10}, 4) == 0
    monkeypatch.setattr(spill, "should_spill", lambda nbytes, reserved=0: False)
    assert resources.spill_bytes(config, 4) == 0                  # in memory
    need = check_disk(tmp_path, 64 ** 3, 0, 2, 10)
    usage = resources.shutil.disk_usage(tmp_path)
    monkeypatch.setattr(resources.shutil, "disk_usage",
                        lambda path: usage._replace(free=need + want // 2))
    assert check_disk(tmp_path, 64 ** 3, 0, 2, 10) == need
    with pytest.raises(ResourceError, match="temporary files for the whole state"):
        check_disk(tmp_path, 64 ** 3, 0, 2, 10, scratch=want)
