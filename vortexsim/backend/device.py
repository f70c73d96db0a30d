"""Devices and array namespaces.

vortexsim runs on NumPy (``Device("cpu")``) or on CuPy (``Device("gpu")``).
The device is chosen once, up front (:func:`resolve_device`); pure functions
infer the namespace from their inputs with :func:`array_namespace`, which
refuses mixed NumPy/CuPy inputs.  Host transfers happen only at boundaries
(:func:`to_host`).

A process that an MPI launcher started among several ranks takes GPU
``local_rank() % device count`` (:func:`select_gpu`): :func:`resolve_device` makes it
the calling thread's current CUDA device when it resolves a GPU, and so does
:func:`vortexsim.backend.mpi.make_communicator` for a GPU run, before NCCL starts.
Resolve the device before allocating anything on the GPU (an allocation on another GPU
first makes :func:`select_gpu` refuse); a thread that makes CuPy arrays of its own
enters ``cupy.cuda.Device(select_gpu())`` first (the current device is per thread).

CuPy is optional: ``import vortexsim`` never imports it eagerly.
"""
from __future__ import annotations

import dataclasses
import logging

import numpy as np

from .spill import is_frozen

logger = logging.getLogger(__name__)

__all__ = ["PRECISIONS", "DEVICE_NAMES", "check_precision", "Device", "resolve_device",
           "device_kind", "array_namespace", "to_host", "host_copy", "to_device", "gpu_available",
           "is_cupy_array", "import_cupy", "stable_argsort", "select_gpu"]

DEVICE_NAMES = ("cpu", "gpu", "auto")


#: arithmetic precisions of the sums
PRECISIONS = ("float64", "float32")


def check_precision(precision) -> np.dtype:
    """The dtype of a precision name ("float64" | "float32"); ValueError otherwise."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r} "
                         "('float64' or 'float32').")
    return np.dtype(precision)


def import_cupy():
    """Return the ``cupy`` module, or raise ``RuntimeError`` saying how to get it."""
    try:
        import cupy  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise RuntimeError(
            "device='gpu' needs CuPy, which is not installed. Install it with "
            "`pip install vortexsim[gpu]` (CUDA 13) or `pip install vortexsim[gpu-cuda12]`, "
            "or pass device='cpu'.") from exc
    return cupy


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy  # noqa: PLC0415
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any failure means "no usable GPU"
        return False


def is_cupy_array(a) -> bool:
    """True if ``a`` is a CuPy ndarray (without importing CuPy)."""
    return type(a).__module__.split(".")[0] == "cupy"


@dataclasses.dataclass(frozen=True, slots=True)
class Device:
    """A compute device: ``"cpu"`` (NumPy) or ``"gpu"`` (CuPy, current CUDA device)."""

    kind: str

    def __post_init__(self):
        if self.kind not in ("cpu", "gpu"):
            raise ValueError(f"Device kind must be 'cpu' or 'gpu', got {self.kind!r}.")

    @property
    def xp(self):
        """The array namespace of this device (``numpy`` or ``cupy``)."""
        return np if self.kind == "cpu" else import_cupy()

    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"

    def describe(self) -> str:
        """Human-readable name, e.g. ``'cpu'`` or ``'gpu:0 (NVIDIA H100 80GB HBM3)'``."""
        if self.kind == "cpu":
            return "cpu"
        cp = import_cupy()
        dev = cp.cuda.Device()
        name = cp.cuda.runtime.getDeviceProperties(dev.id)["name"]
        name = name.decode() if isinstance(name, bytes) else name
        return f"gpu:{dev.id} ({name})"

    @classmethod
    def auto(cls) -> "Device":
        """GPU when CuPy and a CUDA device are usable, else CPU."""
        return cls("gpu") if gpu_available() else cls("cpu")


def resolve_device(device) -> Device:
    """Turn ``"cpu" | "gpu" | "auto" | Device`` into a :class:`Device`.

    ``"gpu"`` without CuPy or without a CUDA device raises ``RuntimeError``:
    an explicit request for the GPU never falls back silently to the CPU.
    """
    if isinstance(device, Device):
        return device
    if not isinstance(device, str) or device not in DEVICE_NAMES:
        raise ValueError(
            f"device must be one of {DEVICE_NAMES}, got {device!r}.")
    if device == "auto":
        device = Device.auto().kind
        if device == "gpu":
            select_gpu()
        return Device(device)
    if device == "gpu":
        cp = import_cupy()
        try:
            n = cp.cuda.runtime.getDeviceCount()
        except Exception as exc:  # noqa: BLE001
            raise RuntimeError(
                f"device='gpu' was requested but CUDA reports no usable GPU ({exc}). "
                "Pass device='cpu' or device='auto'.") from exc
        if n == 0:
            raise RuntimeError("device='gpu' was requested but no CUDA GPU is visible. "
                               "Pass device='cpu' or device='auto'.")
        select_gpu()
    return Device(device)


def select_gpu(environ=None):
    """Make this rank's GPU the calling thread's current CUDA device and return its id:
    GPU ``local_rank % count`` for a rank that an MPI launcher started among several
    (:func:`vortexsim.backend.mpi.local_rank`: the ranks of a node spread over its
    ``count`` visible GPUs, round robin).  A single process is left as it is (device 0,
    or whichever ``CUDA_VISIBLE_DEVICES`` or the caller chose) and gets None, without
    touching CUDA.

    Call it before anything is allocated on the GPU (:func:`resolve_device` does):
    changing the current device under arrays already made would split the run over two
    GPUs, so a rank whose CuPy memory pool already holds memory on another device gets a
    RuntimeError.  ``environ``: the environment to read (default ``os.environ``).
    """
    from .launch import launched_ranks, local_rank  # noqa: PLC0415
    if launched_ranks(environ) <= 1:
        return None
    cp = import_cupy()
    current = cp.cuda.runtime.getDevice()
    count = cp.cuda.runtime.getDeviceCount()
    if count == 0:
        raise RuntimeError("this MPI rank sees no CUDA GPU; pass device='cpu', or give "
                           "every rank a GPU (CUDA_VISIBLE_DEVICES).")
    gpu = local_rank(environ) % count
    if gpu != current:
        used = cp.get_default_memory_pool().used_bytes()
        if used:
            raise RuntimeError(
                f"this rank (node-local rank {local_rank(environ)}) takes GPU {gpu} of "
                f"{count}, but {used} bytes are already allocated on GPU {current}. "
                "Resolve the device (vortexsim.backend.resolve_device or "
                "make_communicator(device=...)) before allocating arrays.")
        cp.cuda.Device(gpu).use()
        logger.debug("MPI rank with local rank %d takes GPU %d of %d",
                     local_rank(environ), gpu, count)
    return gpu


def device_kind(device) -> str:
    """"cpu" or "gpu" for a device name or a :class:`Device`, "auto" (or any other name)
    resolved by whether a GPU is usable, without building a :class:`Device`."""
    kind = getattr(device, "kind", device)
    if kind in ("cpu", "gpu"):
        return kind
    return "gpu" if gpu_available() else "cpu"


def array_namespace(*arrays):
    """Return ``numpy`` or ``cupy`` for the given arrays; raise on a mix.

    ``None`` entries and Python scalars are ignored.
    """
    kinds = set()
    for a in arrays:
        if a is None or isinstance(a, (int, float)):
            continue
        kinds.add("cupy" if is_cupy_array(a) else "numpy")
    if len(kinds) > 1:
        raise TypeError(
            "Got a mix of NumPy and CuPy arrays; pass all arrays on one device "
            "(use vortexsim.backend.to_device(a, device)).")
    if kinds == {"cupy"}:
        return import_cupy()
    return np


def to_host(a):
    """Copy an array to a NumPy array on the host (no-op for NumPy)."""
    if a is None:
        return None
    if is_cupy_array(a):
        return a.get()
    return np.asarray(a)


def host_copy(a):
    """A NumPy copy of ``a`` that owns its data: a host array copied; a CuPy array
    through page-locked memory of CuPy's pinned pool (the transfer at the bus's speed,
    no pages touched for the first time; the buffer goes back to the pool with the
    array).  A frozen array (:func:`vortexsim.backend.spill.frozen`: a whole state put
    together for a snapshot, in memory or in a file) is returned as it is: nothing
    changes it, and a copy would pull a file into memory."""
    if is_frozen(a):
        return a
    if is_cupy_array(a):
        import cupyx  # noqa: PLC0415
        a = a if a.flags.c_contiguous else import_cupy().ascontiguousarray(a)
        out = cupyx.empty_pinned(a.shape, dtype=a.dtype)
        a.get(out=out)
        return out
    return np.array(a, copy=True)


def to_device(a, device: Device):
    """Copy an array to ``device`` (no-op when it is already there)."""
    if a is None:
        return None
    if device.is_gpu:
        return device.xp.asarray(a)
    return to_host(a)


def stable_argsort(keys, xp):
    """Indices that sort ``keys`` (1-D), ties kept in input order, on ``xp``: NumPy needs
    kind="stable"; CuPy's argsort (a radix sort) is always stable (and older CuPy has no
    ``kind``)."""
    return np.argsort(keys, kind="stable") if xp is np else xp.argsort(keys)
