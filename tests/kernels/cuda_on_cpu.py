"""Running vortexsim's CUDA sources on the CPU in tests: a C++ harness (the source
included with the CUDA qualifiers defined away, and extern "C" drivers that run every
thread of a launch in turn) compiled into a shared library, and the pointer of a NumPy
array for ctypes."""
import ctypes
import shutil
import subprocess

import pytest

from vortexsim.kernels.modules import CUDA_DIR


def compile_harness(tmp_path_factory, name, harness, source, std=None):
    """The ctypes library of ``harness`` (C++ text whose ``SOURCE`` is replaced by the
    path of ``kernels/cuda/<source>``), compiled in a fresh folder ``name``; skips the
    test without a C++ compiler."""
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("needs a C++ compiler")
    folder = tmp_path_factory.mktemp(name)
    src = folder / "harness.cpp"
    src.write_text(harness.replace("SOURCE", str(CUDA_DIR / source)))
    so = folder / "harness.so"
    subprocess.run([cxx, "-O2", *([f"-std={std}"] if std else []), "-shared", "-fPIC",
                    "-o", str(so), str(src)], check=True, capture_output=True, timeout=120)
    return ctypes.CDLL(str(so))


def ptr(a):
    """The data pointer of the NumPy array ``a`` (contiguous), for ctypes."""
    return a.ctypes.data_as(ctypes.c_void_p)
