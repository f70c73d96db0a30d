"""Tests of ``vortexsim/backend/device.py``: devices, array namespaces, host/device copies.

CuPy-specific checks are skipped without CuPy and a GPU; the NumPy/CuPy mixing
logic is also checked without CuPy through stand-in objects whose type lives in a
``cupy`` module (``is_cupy_array`` looks only at the type's module) and through a
fake ``cupy`` module in ``sys.modules``.
"""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from vortexsim.backend import device as backend
from vortexsim.backend import (Device, array_namespace, gpu_available, import_cupy,
                               is_cupy_array, resolve_device, to_device, to_host)

HAS_GPU = gpu_available()
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class FakeCupyArray:
    """Stands in for a cupy.ndarray: only its type's module matters to is_cupy_array."""


FakeCupyArray.__module__ = "cupy._core.core"


def fake_cupy_module(device_count):
    """A ``cupy`` stand-in whose runtime reports ``device_count`` GPUs (or raises it)."""
    def get_device_count():
        if isinstance(device_count, Exception):
            raise device_count
        return device_count

    runtime = types.SimpleNamespace(getDeviceCount=get_device_count)
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime),
                                 __name__="cupy")


# --- devices --------------------------------------------------------------

def test_resolve_cpu():
    dev = resolve_device("cpu")
    assert dev == Device("cpu")
    assert dev.kind == "cpu" and not dev.is_gpu
    assert dev.xp is np
    assert dev.describe() == "cpu"
    assert resolve_device(dev) is dev


def test_device_is_frozen_and_validated():
    dev = Device("cpu")
    with pytest.raises(dataclasses.FrozenInstanceError):
        dev.kind = "gpu"
    with pytest.raises(ValueError, match=r"Device kind must be 'cpu' or 'gpu', got 'auto'"):
        Device("auto")
    with pytest.raises(ValueError, match=r"Device kind must be 'cpu' or 'gpu', got 'tpu'"):
        Device("tpu")


@pytest.mark.skipif(HAS_GPU, reason="a usable GPU is present")
def test_auto_without_gpu_is_cpu():
    assert resolve_device("auto") == Device("cpu")
    assert Device.auto() == Device("cpu")


def test_auto_follows_gpu_available(monkeypatch):
    monkeypatch.setattr(backend, "gpu_available", lambda: False)
    assert resolve_device("auto") == Device("cpu")
    monkeypatch.setattr(backend, "gpu_available", lambda: True)
    assert resolve_device("auto") == Device("gpu")


@pytest.mark.parametrize("name", ["GPU", "Cpu", "cuda", "tpu", "", None, 0, 1.0, ["cpu"]])
def test_resolve_invalid_names(name):
    with pytest.raises(ValueError, match=r"device must be one of \('cpu', 'gpu', 'auto'\), got"):
        resolve_device(name)


@pytest.mark.skipif(HAS_GPU, reason="a usable GPU is present")
def test_resolve_gpu_without_gpu_raises():
    with pytest.raises(RuntimeError, match=r"device='gpu'.*(CuPy|GPU).*device='cpu'"):
        resolve_device("gpu")


def test_gpu_without_cupy_raises(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)      # makes `import cupy` fail
    with pytest.raises(RuntimeError, match=r"device='gpu' needs CuPy, which is not installed"):
        resolve_device("gpu")
    with pytest.raises(RuntimeError, match=r"needs CuPy"):
        import_cupy()
    with pytest.raises(RuntimeError, match=r"needs CuPy"):
        Device("gpu").xp                                 # noqa: B018
    assert gpu_available() is False
    assert resolve_device("auto") == Device("cpu")


def test_gpu_with_cupy_but_no_device_raises(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy_module(0))
    assert gpu_available() is False
    with pytest.raises(RuntimeError, match=r"no CUDA GPU is visible.*device='cpu'"):
        resolve_device("gpu")
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy_module(RuntimeError("driver missing")))
    assert gpu_available() is False
    with pytest.raises(RuntimeError, match=r"no usable GPU \(driver missing\)"):
        resolve_device("gpu")
    assert resolve_device("auto") == Device("cpu")


def test_gpu_with_fake_device_resolves(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy_module(2))
    assert gpu_available() is True
    dev = resolve_device("gpu")
    assert dev == Device("gpu") and dev.is_gpu
    assert dev.xp is sys.modules["cupy"]


def test_import_vortexsim_does_not_import_cupy():
    code = "import sys, vortexsim; print('cupy' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=REPO_ROOT, check=True, timeout=60)
    assert out.stdout.strip() == "False"


# --- array namespaces -----------------------------------------------------

def test_array_namespace_numpy():
    a = np.zeros(3)
    assert array_namespace() is np
    assert array_namespace(a) is np
    assert array_namespace(a, np.ones((2, 3), np.float32)) is np
    assert array_namespace(None, 1, 2.5, a) is np         # None and scalars are ignored
    assert array_namespace([1.0, 2.0]) is np               # array-likes count as NumPy


def test_is_cupy_array():
    assert not is_cupy_array(np.zeros(3))
    assert not is_cupy_array([1.0])
    assert not is_cupy_array(None)
    assert is_cupy_array(FakeCupyArray())


def test_array_namespace_refuses_mix_without_cupy():
    # the check happens before CuPy is imported, so it works on any machine
    with pytest.raises(TypeError, match=r"mix of NumPy and CuPy arrays.*to_device"):
        array_namespace(np.zeros(3), FakeCupyArray())
    with pytest.raises(TypeError, match=r"mix of NumPy and CuPy"):
        array_namespace(FakeCupyArray(), None, 3.0, [1.0])


def test_array_namespace_cupy_only(monkeypatch):
    fake = fake_cupy_module(1)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert array_namespace(FakeCupyArray(), None, FakeCupyArray()) is fake
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(RuntimeError, match="needs CuPy"):
        array_namespace(FakeCupyArray())


def test_induced_velocity_refuses_mixed_inputs():
    from vortexsim import induced_velocity  # noqa: PLC0415
    x = np.zeros((2, 3))
    with pytest.raises(TypeError, match=r"mix of NumPy and CuPy"):
        induced_velocity(x, FakeCupyArray(), 0.1)


# --- host/device copies ---------------------------------------------------

def test_to_host_and_to_device_roundtrip_cpu(rng):
    cpu = Device("cpu")
    a = rng.normal(size=(4, 3))
    assert to_host(None) is None
    assert to_device(None, cpu) is None
    h = to_host(a)
    assert isinstance(h, np.ndarray)
    np.testing.assert_array_equal(h, a)
    d = to_device(a, cpu)
    assert isinstance(d, np.ndarray)
    np.testing.assert_array_equal(to_host(d), a)
    lst = to_host([[1.0, 2.0, 3.0]])
    assert isinstance(lst, np.ndarray) and lst.shape == (1, 3)
    f32 = rng.normal(size=5).astype(np.float32)
    assert to_host(to_device(f32, cpu)).dtype == np.float32


# --- real CuPy (skipped without it) ---------------------------------------

@pytest.mark.gpu
def test_cupy_namespace_and_roundtrip(rng):
    cp = pytest.importorskip("cupy")
    gpu = resolve_device("gpu")
    a = rng.normal(size=(4, 3))
    d = to_device(a, gpu)
    assert is_cupy_array(d)
    assert array_namespace(d) is cp
    assert to_device(d, gpu) is not None
    back = to_host(d)
    assert isinstance(back, np.ndarray)
    np.testing.assert_array_equal(back, a)
    np.testing.assert_array_equal(to_device(d, Device("cpu")), a)
    with pytest.raises(TypeError, match="mix of NumPy and CuPy"):
        array_namespace(a, d)
    assert gpu.describe().startswith("gpu:")


def test_a_spilled_array_lives_in_an_unlinked_file_and_is_handed_on_without_a_copy(tmp_path):
    """backend.spill: a memory map of a file already gone from the directory; filled and
    frozen it is read-only, and host_copy returns it as it is (no pull into memory); a
    state larger than the spill fraction of the available memory spills, a small one
    does not."""
    from vortexsim.backend.device import host_copy
    from vortexsim.backend.spill import frozen, is_frozen, should_spill, spill_array
    a = spill_array((1000, 3), np.float64, str(tmp_path))
    assert isinstance(a, np.memmap) and os.listdir(tmp_path) == []
    a[:] = np.arange(3000.0).reshape(1000, 3)
    b = frozen(a)
    assert is_frozen(b) and not b.flags.writeable and host_copy(b) is b
    assert not is_frozen(b + 1.0) and host_copy(b + 1.0) is not b   # results are copied
    c = frozen(np.zeros(4))                              # in memory alike
    assert host_copy(c) is c
    assert np.array_equal(b, np.arange(3000.0).reshape(1000, 3))
    with pytest.raises(ValueError):
        b[0, 0] = 1.0
    plain = np.ones(3)
    assert host_copy(plain) is not plain                 # any other array is copied
    assert spill_array((0, 3), np.float64, str(tmp_path)).shape == (0, 3)
    assert not should_spill(1 << 20) and should_spill(1 << 50)
