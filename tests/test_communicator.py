"""Tests of ``vortexsim/backend/communicator.py``: the one-process communicator."""
import numpy as np
import pytest

from vortexsim.backend import Communicator, SingleProcess


def test_single_process_is_rank_zero_of_one():
    comm = SingleProcess()
    assert isinstance(comm, Communicator)
    assert (comm.rank, comm.size, comm.is_root) == (0, 1, True)
    assert comm.barrier() is None
    assert comm.describe() == "single process"


def test_allreduce_sum_is_a_copy_with_the_same_values():
    comm = SingleProcess()
    a = np.arange(12, dtype=np.float64).reshape(4, 3)
    out = comm.allreduce_sum(a)
    assert out is not a and out.dtype == a.dtype and out.shape == a.shape
    np.testing.assert_array_equal(out, a)
    out[0, 0] = -1.0                      # a new array: the input is untouched
    assert a[0, 0] == 0.0


def test_object_operations_are_the_identity():
    comm = SingleProcess()
    obj = {"t": 1.5, "rows": [1, 2]}
    assert comm.allgather(obj) == [obj] and comm.allgather(obj)[0] is obj
    assert comm.bcast(obj) is obj
    with pytest.raises(ValueError, match="root must be a rank"):
        comm.bcast(obj, root=1)


def test_the_interface_is_abstract():
    with pytest.raises(TypeError):
        Communicator()

    class Incomplete(Communicator):
        rank, size = 0, 1

        def barrier(self):
            return None

    with pytest.raises(TypeError):
        Incomplete()
