"""vortexsim/cli/restart.snapshot_on_ranks: what each rank of a restart holds of the
snapshot, ranks played by threads (tests/thread_ranks.py).  Where the continuation holds
its state split by slabs (a periodic lattice run), rank 0 reads the file and each rank
gets its slab's rows of the element arrays, bit for bit, with the snapshot's scalars,
config and schedule; a snapshot that the continuation does not split (tracers) is read
whole by every rank; a file rank 0 cannot read raises the same UsageError on every
rank."""
import numpy as np
import pytest
from thread_ranks import on_ranks  # tests/thread_ranks.py

from vortexsim.cli import main
from vortexsim.cli.common import UsageError
from vortexsim.cli.ranks import Ranks
from vortexsim.cli.restart import snapshot_on_ranks
from vortexsim.output import read_snapshot


def _snapshot(tmp_path, *sets):
    out = tmp_path / "run"
    args = ["run", "taylor_green", "--device", "cpu", "--set", "n=8", "--set", "plot=false",
            "--steps", "2", "-q", "--out", str(out)]
    for item in sets:
        args += ["--set", item]
    assert main(args) == 0
    return str(out / "snapshot_00000002.nc")


def _on_ranks(size, path):
    return on_ranks(size, lambda comm: snapshot_on_ranks(Ranks(comm), path))


@pytest.mark.parametrize("size", [2, 3])
def test_each_rank_gets_its_slabs_rows(tmp_path, size):
    path = _snapshot(tmp_path)
    whole = read_snapshot(path)
    snaps, end = _on_ranks(size, path), 0
    for snap in snaps:
        r0, r1 = snap.state["rows"]
        assert r0 == end and r1 > r0 and (r1 - r0) % 64 == 0     # whole x-planes of 8²
        end = r1
        for name, want in whole.state["elements"].items():
            got = snap.state["elements"][name]
            assert got.dtype == np.asarray(want).dtype
            assert got.tobytes() == np.asarray(want)[r0:r1].tobytes(), name
        assert snap.state["tracers"]["x"].shape == (0, 3)
        for key in ("t", "iteration", "dt", "sigma_range", "groups"):
            assert snap.state[key] == whole.state[key], key
        assert (snap.config, snap.schedule, snap.path) == \
            (whole.config, whole.schedule, whole.path)
    assert end == 8 ** 3


def test_a_snapshot_that_is_not_split_is_read_whole_by_every_rank(tmp_path):
    path = _snapshot(tmp_path, "tracers=5")
    whole = read_snapshot(path)
    for snap in _on_ranks(2, path):
        assert "rows" not in snap.state
        assert snap.state["elements"]["alpha"].tobytes() == \
            whole.state["elements"]["alpha"].tobytes()
        assert snap.state["tracers"]["x"].shape == (5, 3)


def test_a_file_rank_zero_cannot_read_raises_on_every_rank(tmp_path):
    bad = tmp_path / "snapshot_00000002.nc"
    bad.write_bytes(b"not a netCDF file")

    def work(comm):
        with pytest.raises(UsageError, match="cannot restart"):
            snapshot_on_ranks(Ranks(comm), str(bad))
        return True
    assert on_ranks(2, work) == [True, True]
