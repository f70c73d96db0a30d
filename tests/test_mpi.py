"""MPI ranks (vortexsim.backend.mpi): how a process tells that a launcher started it
among several ranks, the mpi4py communicator's collectives on 2 real ranks (``mpiexec``
of the ``mpi`` extra; skipped where it is not installed), and the CLI's one line when
mpi4py is missing (the CLI on several ranks: tests/test_mpi_cli.py)."""
import sys
import textwrap

import pytest
from mpi_ranks import run_ranks  # tests/mpi_ranks.py

from vortexsim.backend import SingleProcess
from vortexsim.backend import make_communicator
from vortexsim.backend.launch import launched_ranks, local_rank
from vortexsim.cli import main



@pytest.mark.parametrize("environ, ranks, local", [
    ({}, 1, 0),
    ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "3"}, 4, 3),
    ({"PMI_SIZE": "2", "MPI_LOCALRANKID": "1"}, 2, 1),
    ({"PMIX_SIZE": "8", "PMIX_LOCAL_RANK": "5"}, 8, 5),
    ({"SLURM_NTASKS": "16"}, 1, 0),                        # a batch script, not srun
    ({"SLURM_NTASKS": "16", "SLURM_STEP_ID": "0", "SLURM_LOCALID": "2"}, 16, 2),
    ({"OMPI_COMM_WORLD_SIZE": "x"}, 1, 0),
    ({"OMPI_COMM_WORLD_SIZE": "1"}, 1, 0),
])
def test_the_launchers_rank_count_and_local_rank(environ, ranks, local):
    assert launched_ranks(environ) == ranks
    assert local_rank(environ) == local


def test_one_rank_is_a_single_process():
    assert isinstance(make_communicator({}), SingleProcess)
    assert isinstance(make_communicator({"OMPI_COMM_WORLD_SIZE": "1"}), SingleProcess)


@pytest.mark.parametrize("command", [["run", "single_ring"], ["restart", "x.nc"]])
def test_a_run_on_several_ranks_without_mpi4py_names_the_extra(command, tmp_path,
                                                               monkeypatch, capsys):
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    monkeypatch.setitem(sys.modules, "mpi4py", None)          # import mpi4py fails
    out = tmp_path / "run"
    assert main([*command, *(["--out", str(out)] if command[0] == "run" else [])]) == 2
    err = capsys.readouterr().err
    assert "started on 2 MPI ranks" in err and 'pip install "vortexsim[mpi]"' in err
    assert not out.exists()


def test_two_ranks_sum_gather_and_broadcast_alike(tmp_path):
    """On 2 ranks: the sum of rank-dependent float64 arrays equals their sum and is the
    same bits on both ranks; allgather lists the ranks' objects in order; bcast hands
    rank 1's object to both."""
    script = tmp_path / "collectives.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        from vortexsim.backend import MPICommunicator, make_communicator
        comm = make_communicator()
        assert isinstance(comm, MPICommunicator) and comm.size == 2, comm.describe()
        def part(rank):      # values over 16 decades
            rng = np.random.default_rng(rank)
            return rng.standard_normal(1000) * 10.0 ** rng.integers(-8, 8, 1000)
        total = comm.allreduce_sum(part(comm.rank))
        assert np.array_equal(total, part(0) + part(1)), "not the sum"
        assert comm.allgather(("rank", comm.rank)) == [("rank", 0), ("rank", 1)]
        assert comm.bcast({"from": comm.rank}, root=1) == {"from": 1}
        sys.stdout.write(f"{comm.describe()} {total.tobytes().hex()[:64]}\\n")
    """))
    done = run_ranks(2, [str(script)])
    assert done.returncode == 0, done.stderr[-2000:]
    lines = sorted(done.stdout.strip().splitlines())
    assert [l.split(" ", 5)[:5] for l in lines] == [["MPI", "rank", "0", "of", "2"],
                                                  ["MPI", "rank", "1", "of", "2"]]
    assert lines[0].split()[-1] == lines[1].split()[-1]       # the same bits on both


def test_two_ranks_share_the_targets_of_an_fmm_sum(tmp_path):
    """make_summation(..., communicator=) on 2 real ranks: the FMM's u and ∇u of 2000
    blobs (elements and tracers) within its tolerance of one rank's, the same bits on
    both ranks; and the FMM's upward pass shared by the two ranks (the leaves' runs
    through mpi4py's Allgatherv) equal to one rank's to round-off."""
    script = tmp_path / "shared.py"
    script.write_text(textwrap.dedent("""
        import hashlib
        import numpy as np
        from vortexsim.backend import make_communicator
        from vortexsim.summation import make_summation
        rng = np.random.default_rng(3)
        x, alpha = rng.random((2000, 3)), 1e-3 * rng.standard_normal((2000, 3))
        sigma = np.full(2000, 0.05)
        targets = np.concatenate([x, rng.random((300, 3))])
        one = make_summation("fmm", tol=1e-6)(x, alpha, sigma, targets, n_self=2000,
                                              gradient=2000)
        comm = make_communicator()
        u, g = make_summation("fmm", tol=1e-6, communicator=comm)(
            x, alpha, sigma, targets, n_self=2000, gradient=2000)
        assert u.shape == (2300, 3) and g.shape == (2000, 3, 3)
        assert np.linalg.norm(u - one[0]) <= 1e-5 * np.linalg.norm(one[0])
        assert np.linalg.norm(g - one[1]) <= 1e-5 * np.linalg.norm(one[1])
        # the FMM's upward pass shared over MPI (Allgatherv of the leaves' runs): each
        # rank's half of the elements against one rank's call, to round-off
        from vortexsim.fmm import FMM
        fmm = FMM("gaussian", tol=1e-3, device="cpu", tree="uniform")
        mine = np.arange(comm.rank, 2000, 2)
        us, gs = fmm.evaluate(x, alpha, sigma, x[mine], depth=2, ranks=comm)
        assert "p2m_gather" in fmm.timings
        u1, g1 = FMM("gaussian", tol=1e-3, device="cpu", tree="uniform").evaluate(
            x, alpha, sigma, x, depth=2)
        assert np.abs(us - u1[mine]).max() <= 1e-13 * np.abs(u1).max()
        assert np.abs(gs - g1[mine]).max() <= 1e-13 * np.abs(g1).max()
        print(comm.rank, hashlib.sha256(u.tobytes() + g.tobytes()).hexdigest())
    """))
    done = run_ranks(2, [str(script)])
    assert done.returncode == 0, done.stderr[-2000:]
    digests = sorted(line for line in done.stdout.splitlines() if line[:1].isdigit())
    assert [d.split()[0] for d in digests] == ["0", "1"]
    assert digests[0].split()[1] == digests[1].split()[1]


def test_a_case_stepped_on_two_ranks_follows_the_one_rank_run(tmp_path):
    """make_case(..., communicator=) on 2 real ranks: three RK4 steps of a small
    leapfrog with the FMM (tol 1e-8), every rank holding the whole state and summing its
    share of the targets: the same bits on both ranks, the one-rank state within the
    FMM's tolerance."""
    script = tmp_path / "steps.py"
    script.write_text(textwrap.dedent("""
        import hashlib
        import numpy as np
        import vortexsim
        from vortexsim.backend import make_communicator
        comm = make_communicator()
        args = dict(n_phi=24, tracers_per_ring=64, method="fmm", tol=1e-8, progress=False)
        one = vortexsim.make_case("leapfrog", **args)
        two = vortexsim.make_case("leapfrog", communicator=comm, **args)
        assert type(two.model.summation).__name__ == "SharedTargets"
        for _ in range(3):
            one.step()
            two.step()
        for a, b in ((one.elements.x, two.elements.x), (one.elements.alpha, two.elements.alpha),
                     (one.tracers.x, two.tracers.x)):
            assert np.abs(a - b).max() <= 1e-7 * np.abs(a).max(), np.abs(a - b).max()
        state = b"".join(a.tobytes() for a in (two.elements.x, two.elements.alpha,
                                                  two.tracers.x))
        print(comm.rank, hashlib.sha256(state).hexdigest())
    """))
    done = run_ranks(2, [str(script)])
    assert done.returncode == 0, done.stderr[-2000:]
    digests = sorted(line for line in done.stdout.splitlines() if line[:1].isdigit())
    assert [d.split()[0] for d in digests] == ["0", "1"]
    assert digests[0].split()[1] == digests[1].split()[1]


# --- issue 37's GPU ranks, on the CPU: the MPI communicator's array collectives
# --- (allgather_array, alltoall), make_communicator(device="cpu"), SharedTargets' shares
# --- gathered through Allgatherv, and the GPU a rank takes (select_gpu, with a fake CuPy)

def _run_script(tmp_path, name, body, n=2):
    """Run ``body`` (dedented Python) on ``n`` MPI ranks under ``python -m mpi4py``, which
    aborts every rank when one raises (instead of leaving the others waiting in a
    collective); the completed process."""
    script = tmp_path / name
    script.write_text(textwrap.dedent(body))
    return run_ranks(n, ["-m", "mpi4py", str(script)])


def test_two_ranks_gather_arrays_of_unequal_length(tmp_path):
    """allgather_array on 2 ranks: parts of different lengths (one empty), of equal
    lengths, with counts given, of float64 (n, 3, 3) and int32 (n,) rows, the result
    the concatenation in rank order on both; a trailing shape that differs raises on
    every rank; make_communicator(device="cpu") is the MPI communicator."""
    done = _run_script(tmp_path, "gather.py", """
        import numpy as np
        from vortexsim.backend import MPICommunicator, make_communicator
        comm = make_communicator(device="cpu")
        assert type(comm) is MPICommunicator and comm.size == 2, comm.describe()
        def part(rank, rows):
            return np.random.default_rng(rank).standard_normal((rows, 3, 3))
        for rows in ([5, 0], [0, 4], [3, 3]):        # unequal (one empty), equal
            got = comm.allgather_array(part(comm.rank, rows[comm.rank]))
            want = np.concatenate([part(0, rows[0]), part(1, rows[1])])
            assert got.shape == want.shape and np.array_equal(got, want), (rows, got.shape)
        counts = [2, 7]
        ints = np.arange(counts[comm.rank], dtype=np.int32) + 100 * comm.rank
        got = comm.allgather_array(ints, counts=counts)
        assert got.dtype == np.int32
        assert got.tolist() == list(range(2)) + list(range(100, 107)), got
        try:
            comm.allgather_array(np.zeros((2, 3 + comm.rank)))
        except ValueError as exc:
            assert "trailing shape" in str(exc)
        else:
            raise AssertionError("unequal trailing shapes were not refused")
        print("ok", comm.rank)
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(done.stdout.split()) == ["0", "1", "ok", "ok"]


def test_two_ranks_exchange_parts_alltoall(tmp_path):
    """alltoall on 2 ranks: each rank's part for rank r arrives at r only, arrays of
    different lengths (one empty) and Python objects alike, in sender order."""
    done = _run_script(tmp_path, "alltoall.py", """
        import numpy as np
        from vortexsim.backend import make_communicator
        comm = make_communicator()
        r = comm.rank
        parts = [np.full((2 * r + dest, 3), 10 * r + dest, dtype=np.float64)
                 for dest in range(2)]
        got = comm.alltoall(parts)
        for src in range(2):
            assert got[src].shape == (2 * src + r, 3), (src, got[src].shape)
            assert (got[src] == 10 * src + r).all()
        assert comm.alltoall([("from", r, "to", d) for d in range(2)]) == \\
            [("from", s, "to", r) for s in range(2)]
        print("ok", r)
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(done.stdout.split()) == ["0", "1", "ok", "ok"]


def test_two_ranks_gather_and_scatter_rows_through_rank_zero_in_messages(tmp_path):
    """gather_rows_on_root on 2 ranks (what a split state's snapshot uses): rank 0 gets
    both ranks' rows in rank order in its array (a memory map here), in messages of at
    most chunk_rows rows (several, a last partial one; an empty part too); the base
    class's alltoall rounds give the same rows; with no array on rank 0 both finish.
    scatter_rows_from_root (a split restart's) gives each rank its rows back, of the
    dtype asked, on both paths."""
    done = _run_script(tmp_path, "rows.py", """
        import numpy as np
        from vortexsim.backend import Communicator, make_communicator
        from vortexsim.backend.spill import spill_array
        comm = make_communicator(device="cpu")
        for counts in ([7, 11], [0, 5], [4, 0]):
            part = np.arange(3.0 * counts[comm.rank]).reshape(-1, 3) + 1000 * comm.rank
            want = np.concatenate([np.arange(3.0 * c).reshape(-1, 3) + 1000 * q
                                   for q, c in enumerate(counts)])
            for gather in (type(comm).gather_rows_on_root, Communicator.gather_rows_on_root):
                out = spill_array((sum(counts), 3), np.float64, ".") if comm.rank == 0 \
                    else None
                gather(comm, part, counts, out, chunk_rows=3)
                if comm.rank == 0:
                    assert np.array_equal(out, want), (counts, out, want)
                # rank 0 without an array (it could not make one): the rows dropped,
                # every rank finishes
                gather(comm, part, counts, None, chunk_rows=3)
            for scatter in (type(comm).scatter_rows_from_root,
                            Communicator.scatter_rows_from_root):
                for tail, dtype in (((3,), np.float64), ((), np.int64)):
                    whole = want.reshape(-1, *tail) if tail else want[:, 0].astype(dtype)
                    got = scatter(comm, whole if comm.rank == 0 else None, counts, tail,
                                  dtype, chunk_rows=3)
                    r0 = sum(counts[:comm.rank])
                    assert got.dtype == dtype and got.shape == (counts[comm.rank], *tail)
                    assert np.array_equal(got, whole[r0:r0 + counts[comm.rank]])
        print("ok", comm.rank)
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(done.stdout.split()) == ["0", "1", "ok", "ok"]


def test_two_ranks_share_direct_sums_along_the_morton_curve(tmp_path):
    """make_summation("direct", ..., communicator=) on 2 real ranks (the shares gathered
    by Allgatherv): elements and tracers, ∇u at the elements and the first 30 tracers,
    the elements' self pairs out; the one-rank call to round-off, the same bits on both
    ranks."""
    done = _run_script(tmp_path, "shared_direct.py", """
        import hashlib
        import numpy as np
        from vortexsim.backend import make_communicator
        from vortexsim.summation import make_summation
        rng = np.random.default_rng(5)
        x, alpha = rng.random((400, 3)), 1e-3 * rng.standard_normal((400, 3))
        sigma = np.full(400, 0.05)
        targets = np.concatenate([x, rng.random((100, 3))])
        one = make_summation("direct")(x, alpha, sigma, targets, n_self=400, gradient=430)
        comm = make_communicator()
        u, g = make_summation("direct", communicator=comm)(
            x, alpha, sigma, targets, n_self=400, gradient=430)
        assert u.shape == (500, 3) and g.shape == (430, 3, 3)
        np.testing.assert_allclose(u, one[0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(g, one[1], rtol=1e-12, atol=1e-15)
        print(comm.rank, hashlib.sha256(u.tobytes() + g.tobytes()).hexdigest())
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    digests = sorted(line for line in done.stdout.splitlines() if line[:1].isdigit())
    assert [d.split()[0] for d in digests] == ["0", "1"]
    assert digests[0].split()[1] == digests[1].split()[1]


def _fake_cupy(devices, current=0, used=0):
    """A stand-in for CuPy with ``devices`` GPUs, ``current`` the current one and ``used``
    bytes in its memory pool: what vortexsim.backend.device.select_gpu reads."""
    import types  # noqa: PLC0415
    state = types.SimpleNamespace(current=current)

    def use(i):
        state.current = i
    runtime = types.SimpleNamespace(getDevice=lambda: state.current,
                                    getDeviceCount=lambda: devices)
    cuda = types.SimpleNamespace(
        runtime=runtime,
        Device=lambda i: types.SimpleNamespace(use=lambda: use(i)))
    pool = types.SimpleNamespace(used_bytes=lambda: used)
    return types.SimpleNamespace(cuda=cuda, get_default_memory_pool=lambda: pool), state


@pytest.mark.parametrize("local, devices, want", [(0, 2, 0), (1, 2, 1), (3, 2, 1),
                                                   (5, 4, 1), (2, 1, 0)])
def test_each_rank_takes_gpu_local_rank_mod_count(monkeypatch, local, devices, want):
    """select_gpu: a rank of a launcher takes GPU local_rank % count and makes it
    current; a single process is left as it is, without touching CUDA."""
    from vortexsim.backend.device import select_gpu
    fake, state = _fake_cupy(devices)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    environ = {"OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": str(local)}
    assert select_gpu(environ) == want and state.current == want
    assert select_gpu(environ) == want                           # again: nothing changes
    monkeypatch.setitem(sys.modules, "cupy", None)                # importing it would fail
    assert select_gpu({}) is None


def test_a_rank_that_allocated_on_another_gpu_is_refused(monkeypatch):
    from vortexsim.backend.device import select_gpu
    environ = {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}
    fake, state = _fake_cupy(2, current=0, used=1 << 20)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(RuntimeError, match="already allocated on GPU 0"):
        select_gpu(environ)
    assert state.current == 0
    fake, state = _fake_cupy(2, current=1, used=1 << 20)         # on its own GPU: fine
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert select_gpu(environ) == 1
