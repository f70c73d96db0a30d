"""Shared fixtures for the vortexsim test suite.

* ``rng``: a seeded :class:`numpy.random.Generator`, different (but reproducible)
  for every test, so that tests do not share one random stream.
* Tests marked ``@pytest.mark.gpu`` are skipped when CuPy or a CUDA GPU is
  missing (``pyproject.toml`` declares the marker; ``shared/docs/gpu.md``).
* SIGINT is not ignored by the processes the tests start: a suite started in the
  background by a shell without job control inherits SIGINT ignored, and the signal
  tests' commands (test_faults, test_guards, ...) would inherit that too.
"""
from __future__ import annotations

import os
import signal
import sys
import zlib

import numpy as np
import pytest

try:  # let a plain `pytest` (not only `python -m pytest`) find the uninstalled package
    import vortexsim  # noqa: F401
except ImportError:  # pragma: no cover - depends on how pytest is started
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# an ignored SIGINT survives exec; a Python handler becomes the default in the children
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: Base seed of the suite; change it to re-run every randomized test on new data.
BASE_SEED = 20240611


@pytest.fixture
def rng(request) -> np.random.Generator:
    """Seeded generator; the seed depends on the test id, so runs are reproducible."""
    seed = zlib.crc32(request.node.nodeid.encode()) ^ BASE_SEED
    return np.random.default_rng(seed)


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    from vortexsim.backend import gpu_available  # noqa: PLC0415

    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs CuPy and a CUDA GPU")
    for item in gpu_items:
        item.add_marker(skip)
