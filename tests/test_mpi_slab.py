"""The slab-decomposed particle-mesh solve (vortexsim.summation.slab_mesh) on 2 real MPI
ranks (``mpiexec`` of the ``mpi`` extra; skipped where it is not installed): the slab FFT
against the whole lattice's, and u and ∇u at each rank's targets against the one-process
MeshSolve to 1e-12 of the field's largest value (issue 37's acceptance), for every
Gaussian order, on slabs of unequal width (n = 17)."""
import textwrap

from mpi_ranks import run_ranks  # tests/mpi_ranks.py


def test_two_ranks_solve_as_one_process(tmp_path):
    script = tmp_path / "slab_mesh.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        from vortexsim.backend import MPICommunicator, make_communicator
        from vortexsim.geometry.lattice_modes import rfft3
        from vortexsim.geometry.slab import SlabFFT
        from vortexsim.summation.mesh import MeshSolve
        from vortexsim.summation.slab_mesh import SlabMeshSolve
        comm = make_communicator()
        assert isinstance(comm, MPICommunicator) and comm.size == 2, comm.describe()
        box, n, sigma = 2 * np.pi, 17, 0.5
        rng = np.random.default_rng(37)               # the same data on both ranks
        field = rng.standard_normal((n, n, n))
        x = rng.random((400, 3)) * box
        x[:100, 0] = rng.integers(0, n + 1, 100) * box / n      # on the slab boundaries
        x[100:150] += box * rng.choice([-1.0, 1.0], (50, 3))    # beyond the box
        alpha = 1e-2 * rng.standard_normal((400, 3))
        alpha -= alpha.mean(axis=0)
        targets = np.concatenate([x[::3], rng.random((100, 3)) * box])
        fft = SlabFFT(n, comm)
        (i0, i1), (j0, j1) = fft.x_planes, fft.y_planes
        modes = fft.forward(np.ascontiguousarray(field[i0:i1]))
        err_fft = np.abs(modes - rfft3(field, np)[:, j0:j1]).max()
        err_back = np.abs(fft.inverse(modes) - field[i0:i1]).max()
        out = [f"rank {comm.rank} planes {i0} {i1} fft {err_fft:.3e} {err_back:.3e}"]
        for order in (2, 4, 6):
            want_u, want_grad = MeshSolve(box, n, sigma, order=order).evaluate(
                x, alpha, targets)
            solve = SlabMeshSolve(box, n, sigma, order, comm)
            mine_x = solve.owner_of(x) == comm.rank
            mine_t = solve.owner_of(targets) == comm.rank
            u, grad = solve.evaluate(x[mine_x], alpha[mine_x], targets[mine_t])
            eu = np.abs(u - want_u[mine_t]).max() / np.abs(want_u).max()
            eg = np.abs(grad - want_grad[mine_t]).max() / np.abs(want_grad).max()
            out.append(f"order {order} targets {int(mine_t.sum())} u {eu:.3e} grad {eg:.3e}")
        print(" | ".join(out), flush=True)
    """))
    done = run_ranks(2, [str(script)])
    assert done.returncode == 0, done.stderr[-2000:]
    lines = sorted(line for line in done.stdout.splitlines() if line.startswith("rank "))
    assert [line.split()[:4] for line in lines] == [["rank", "0", "planes", "0"],
                                                   ["rank", "1", "planes", "9"]]
    for line in lines:
        parts = line.split(" | ")
        fft = parts[0].split()
        assert float(fft[-2]) < 1e-12 and float(fft[-1]) < 1e-13, line
        assert len(parts) == 4
        for part in parts[1:]:
            words = part.split()
            assert int(words[3]) > 0, line                   # each rank has targets
            assert float(words[5]) <= 1e-12 and float(words[7]) <= 1e-12, line
