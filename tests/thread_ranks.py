"""Ranks played by threads in tests: :class:`ThreadRanks`, a communicator whose allgather goes through a shared list and a
barrier (``alltoall`` is the base class's, through allgather), and :func:`on_ranks`,
which runs one function per rank and re-raises the first rank's error (a failing rank
breaks the barrier, so that the others do not wait for it)."""
import threading

from vortexsim.backend import Communicator

#: seconds a rank waits at a barrier before the test fails
BARRIER_TIMEOUT = 60


class ThreadRanks(Communicator):
    """Rank ``rank`` of ``size`` threads: allgather through a shared list and a barrier."""

    def __init__(self, rank, size, board, barrier):
        self.rank, self.size, self.board, self._barrier = rank, size, board, barrier

    def barrier(self):
        self._barrier.wait()

    def allgather(self, obj):
        self.board[self.rank] = obj
        self._barrier.wait()
        out = list(self.board)
        self._barrier.wait()                  # nobody overwrites before all have read
        return out

    def allreduce_sum(self, array):
        return sum(self.allgather(array))

    def bcast(self, obj, root=0):
        return self.allgather(obj)[root]

    def alltoall(self, parts):
        """Through allgather (the base class's): every part to every rank."""
        return super().alltoall(parts)


def on_ranks(size, work, ranks=ThreadRanks):
    """[work(communicator) of rank 0, 1, ...], each rank a thread (``ranks``: the
    communicator class, :class:`ThreadRanks` or a subclass); the first error of a rank
    (in rank order) raised here."""
    board, out, errors = [None] * size, [None] * size, [None] * size
    barrier = threading.Barrier(size, timeout=BARRIER_TIMEOUT)

    def run(rank):
        try:
            out[rank] = work(ranks(rank, size, board, barrier))
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            errors[rank] = exc
            barrier.abort()
    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(2 * BARRIER_TIMEOUT)
    first = next((e for e in errors if e is not None
                  and not isinstance(e, threading.BrokenBarrierError)), None)
    first = first or next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    assert not any(t.is_alive() for t in threads), "a rank did not finish"
    return out
