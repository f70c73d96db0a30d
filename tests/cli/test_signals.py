"""SIGINT/SIGTERM sequences in every phase of the ``vortexsim`` command: exit 130 (the
first signal SIGINT) or 143 (SIGTERM), exactly one line on stderr, never a traceback and
never death by the signal, and a line that says what is true of the run directory.

The signals land in a phase by events, not by wall-clock timing: a driver script named
``vortexsim`` (so that the package installs the command's signal handling, as for the
console script) patches the function that starts the phase so that it sends the
sequence to its own process, from a helper thread, when the phase begins (the first
import of NumPy or xarray, a step of the run, the final plot, the first file a viewing
command opens).  The helper thread sends the whole sequence whatever the main thread
does meanwhile, so each run covers some interleaving of signals and the command's work;
the assertions hold for every one.  Runs are tiny (a few elements, two to four steps).
"""
from __future__ import annotations

import glob
import os
import re
import signal
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = ["--device", "cpu", "-qq", "--set", "n_phi=6", "--set", "layers=1",
        "--set", "tracers_per_ring=4"]
#: [s] generous bound on a command's whole life (a hang fails the test, slowness not)
TIMEOUT = 120

DRIVER = r'''
"""The vortexsim command, sending itself $VS_SEND (comma-separated names) when the
phase $VS_POINT begins."""
import builtins, os, signal, sys, threading

SEND = [getattr(signal, s) for s in os.environ["VS_SEND"].split(",")]
POINT = os.environ["VS_POINT"]
fired = []


def fire():
    if fired:
        return
    fired.append(True)
    threading.Thread(target=send).start()


def send():
    """The sequence; the next signal once the process has taken the first (an event),
    so that "first" is the first sent."""
    pid, handling = os.getpid(), sys.modules.get("vortexsim.cli.signals")
    for i, s in enumerate(SEND):
        os.kill(pid, s)
        while i == 0 and handling is not None and handling.first() is None:
            threading.Event().wait(0.001)


if POINT.startswith("import-"):
    module, real_import = POINT[len("import-"):], builtins.__import__

    def hooked_import(name, *args, **kwargs):
        if name == module and module not in sys.modules:
            fire()
        return real_import(name, *args, **kwargs)
    builtins.__import__ = hooked_import

import vortexsim                      # noqa: E402  (installs the signal handling)
from vortexsim.cli import main        # noqa: E402

if POINT == "open":
    import netCDF4, xarray
    real_open, real_nc = xarray.open_dataset, netCDF4.Dataset

    def open_dataset(*args, **kwargs):
        fire()
        return real_open(*args, **kwargs)

    class Dataset(real_nc):
        def __init__(self, *args, **kwargs):
            fire()
            super().__init__(*args, **kwargs)
    xarray.open_dataset, netCDF4.Dataset = open_dataset, Dataset
elif POINT == "step":
    from vortexsim.simulation import Simulation
    real_step = Simulation.step

    def step(self, *args, **kwargs):
        if self.iteration == 1:
            fire()
        return real_step(self, *args, **kwargs)
    Simulation.step = step
elif POINT == "plot":
    from vortexsim.output import writers
    real_plot = writers.plot_rows

    def plot_rows(*args, **kwargs):
        fire()
        return real_plot(*args, **kwargs)
    writers.plot_rows = plot_rows
sys.exit(main())
'''

SEQUENCES = {"SIGINT": ["SIGINT"], "SIGTERM": ["SIGTERM"], "SIGINTx2": ["SIGINT"] * 2,
             "SIGINTx3": ["SIGINT"] * 3, "SIGINT+SIGTERM": ["SIGINT", "SIGTERM"]}


def _env(**extra):
    return {**os.environ, "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
            **extra}


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    path = tmp_path_factory.mktemp("bin") / "vortexsim"
    path.write_text(DRIVER)
    return str(path)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A finished tiny run for the viewing commands."""
    out = tmp_path_factory.mktemp("viewed") / "run"
    subprocess.run([sys.executable, "-m", "vortexsim", "run", "single_ring", *TINY,
                    "--set", "plot=false", "--steps", "2", "--out", str(out)],
                   env=_env(), check=True, timeout=TIMEOUT, capture_output=True)
    return out


def _check(proc_result, sequence, out=None, exact_first=True):
    """Exit 128 + the first signal, one line, no traceback; the line true of ``out``."""
    rc, err = proc_result.returncode, proc_result.stderr
    first = getattr(signal, sequence[0])
    if not exact_first:          # signals sent back to back: the kernel may swap them
        first = signal.SIGTERM if rc == 128 + signal.SIGTERM else signal.SIGINT
        assert first.name in sequence
        assert f"by {first.name}" in err, err
    assert rc == 128 + first, (sequence, rc, err)           # also: not killed (rc < 0)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert len(err.strip().splitlines()) == 1 and err.endswith("\n"), err
    if out is not None:
        _truthful(err, out)
    return err


def _truthful(err, out):
    """What the line says of the run directory holds there."""
    snapshots = glob.glob(os.path.join(out, "snapshot_*.nc"))
    for said in re.findall(r"(?:checkpoint written|newest snapshot is|last snapshot):?\s+"
                           r"(\S+?\.nc)", err):
        assert os.path.isfile(said), (err, os.listdir(out))
    if "no snapshot was written" in err:
        assert not snapshots, (err, snapshots)
    if "checkpoint" in err and "checkpoint written" not in err:
        assert "without a checkpoint" in err, err


def _driven(driver, point, sequence, args):
    return subprocess.run([sys.executable, driver, *args], capture_output=True, text=True,
                          timeout=TIMEOUT, env=_env(VS_POINT=point,
                                                    VS_SEND=",".join(sequence)))


@pytest.mark.parametrize("name", SEQUENCES)
def test_signals_while_starting(driver, tmp_path, name):
    """In the package's import (its first import of NumPy): nothing written yet."""
    out = tmp_path / "o"
    result = _driven(driver, "import-numpy", SEQUENCES[name],
                     ["run", "single_ring", *TINY, "--steps", "2", "--out", str(out)])
    err = _check(result, SEQUENCES[name])
    assert "while starting (nothing was written)" in err
    assert not out.exists()


@pytest.mark.parametrize("name", SEQUENCES)
def test_signals_during_a_run(driver, tmp_path, name):
    """During the run's second step (before the second snapshot)."""
    out = tmp_path / "o"
    result = _driven(driver, "step", SEQUENCES[name],
                     ["run", "single_ring", *TINY, "--set", "plot=false", "--steps", "4",
                      "--out", str(out)])
    _check(result, SEQUENCES[name], out)


@pytest.mark.parametrize("name", ["SIGINT", "SIGINTx3", "SIGINT+SIGTERM"])
def test_signals_during_the_final_plot(driver, tmp_path, name):
    out = tmp_path / "o"
    result = _driven(driver, "plot", SEQUENCES[name],
                     ["run", "single_ring", *TINY, "--steps", "2", "--out", str(out)])
    _check(result, SEQUENCES[name], out)


@pytest.mark.parametrize("name", SEQUENCES)
def test_signals_in_the_lazy_import_of_xarray_by_info(driver, run_dir, name):
    result = _driven(driver, "import-xarray", SEQUENCES[name],
                     ["info", str(run_dir / "snapshot_00000002.nc")])
    err = _check(result, SEQUENCES[name])
    assert "vortexsim info" in err or "exiting at once" in err


@pytest.mark.parametrize("command", ["info", "render", "export"])
@pytest.mark.parametrize("name", SEQUENCES)
def test_signals_in_the_viewing_commands(driver, run_dir, tmp_path, command, name):
    """When the command opens its first netCDF file."""
    if command != "info" and name in ("SIGTERM", "SIGINTx2"):
        pytest.skip("the other sequences cover this command")
    args = {"info": ["info", str(run_dir / "snapshot_00000002.nc")],
            "render": ["render", str(run_dir), "--out", str(tmp_path / "f.png"), "-qq"],
            "export": ["export", "--xdmf", str(run_dir), "-qq"]}[command]
    _check(_driven(driver, "open", SEQUENCES[name], args), SEQUENCES[name])


@pytest.mark.parametrize("name", ["SIGINTx2", "SIGINTx3", "SIGINT+SIGTERM"])
def test_sequences_sent_from_outside_during_a_run(tmp_path, name):
    """The sequence from this process, back to back, once the run has written its first
    snapshot (an event: the file exists); whatever the run was doing then, exit 128 +
    the first signal and one true line."""
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "vortexsim", "run", "single_ring", *TINY,
                             "--set", "plot=false", "--set", "t_end=1000", "--out", str(out)],
                            stderr=subprocess.PIPE, text=True, env=_env())
    deadline = time.monotonic() + TIMEOUT
    while not glob.glob(str(out / "snapshot_*.nc")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    for sig in SEQUENCES[name]:
        proc.send_signal(getattr(signal, sig))
    _, err = proc.communicate(timeout=TIMEOUT)
    _check(subprocess.CompletedProcess(proc.args, proc.returncode, "", err),
           SEQUENCES[name], out, exact_first=False)


@pytest.mark.skipif(not os.path.exists("/proc/self/wchan"), reason="needs /proc/PID/wchan")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_main_thread_blocked_in_c_still_ends_on_the_first_signal(tmp_path, sig):
    """A command blocked inside C code that never returns to Python (netCDF opening a
    FIFO that no one writes: the kernel's wait_for_partner), where Python's handlers
    cannot run: the watcher thread ends it after the grace time, exit 128 + signal."""
    fifo = tmp_path / "blocked.nc"
    os.mkfifo(fifo)
    script = (f"import sys; sys.argv = ['vortexsim', 'info', 'x']\n"
              "import vortexsim, netCDF4\nimport vortexsim.cli.command as command\n"
              f"command.cmd_info = lambda args, argv: netCDF4.Dataset({str(fifo)!r})\n"
              "from vortexsim.cli import main\nsys.exit(main())\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE,
                            text=True, env=_env())
    deadline = time.monotonic() + TIMEOUT
    while True:                            # the event: the process waits in the FIFO's open
        with open(f"/proc/{proc.pid}/wchan") as fh:
            wchan = fh.read()
        if "partner" in wchan or "fifo" in wchan:
            break
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    _check(subprocess.CompletedProcess(proc.args, proc.returncode, "", err),
           [signal.Signals(sig).name])


@pytest.mark.parametrize("name", ["SIGINTx2", "SIGINT+SIGTERM"])
def test_signals_before_the_first_snapshot_say_what_is_on_disk(driver, tmp_path, name):
    """In the run's lazy import of xarray, before its first snapshot is on disk: the line
    names no checkpoint or snapshot that does not exist."""
    out = tmp_path / "o"
    result = _driven(driver, "import-xarray", SEQUENCES[name],
                     ["run", "single_ring", *TINY, "--set", "plot=false", "--steps", "4",
                      "--out", str(out)])
    err = _check(result, SEQUENCES[name], out)
    assert "the last snapshot of the run directory is a checkpoint" not in err


@pytest.mark.parametrize("installed", [True, False])
def test_a_signal_while_the_ranks_meet_at_the_end_is_let_go(tmp_path, installed):
    """The ranks of an MPI run meet before MPI_Finalize while rank 0 may still be writing
    the run's last file; a launcher forwards SIGTERM to every rank then.  A rank that
    exited at once would make the launcher end rank 0 in its write: the signal is taken
    and let go, the command's outcome stands (the command process and a library one)."""
    script = tmp_path / "meet.py"
    script.write_text(
        "import os, signal, sys\n"
        "import vortexsim.cli.command as command\n"
        "from vortexsim.cli import signals\n"
        f"if {installed}:\n"
        "    signals.install()\n"
        "def meet():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    for _ in range(100000):\n"
        "        pass\n"
        "    print('met', flush=True)\n"
        "command.finalize_mpi = meet\n"
        "sys.exit(command.main(['cases']))\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("met")
    assert proc.stderr == ""
