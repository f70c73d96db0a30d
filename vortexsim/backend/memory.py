"""Every memory query of vortexsim: host memory (Linux's ``/proc/meminfo`` within the
process's cgroup limit and its address-space limit, ``ulimit -v``) and GPU memory (CuPy's
``memGetInfo`` of the current CUDA device).

Each function returns bytes, or None where the machine does not tell; none raises for a
missing file or a missing GPU, so that a caller can decide to check nothing rather than
refuse to run.
"""
from __future__ import annotations

import os

try:
    import resource
except ImportError:                       # not a POSIX system
    resource = None

from .device import device_kind, import_cupy

__all__ = ["meminfo", "meminfo_available", "cgroup_room", "address_space_room",
           "host_available_memory",
           "gpu_memory_info", "gpu_free_memory", "gpu_total_memory", "available_memory"]

#: cgroup memory files (limit, usage): version 2, then version 1
CGROUP_FILES = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                 "/sys/fs/cgroup/memory/memory.usage_in_bytes"))


def meminfo():
    """{field: bytes} of /proc/meminfo ({} where there is none)."""
    out = {}
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                name, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    out[name] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    except OSError:
        pass
    return out


def meminfo_available():
    """Bytes of ``MemAvailable`` of /proc/meminfo (the kernel's estimate of what can be
    allocated without swapping), or None."""
    return meminfo().get("MemAvailable")


def _read_int(path):
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read(64).strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def cgroup_room():
    """Bytes the process's cgroup may still allocate (limit − usage), or None (no cgroup
    memory limit, or none readable)."""
    for limit, usage in CGROUP_FILES:
        lim, used = _read_int(limit), _read_int(usage)
        if lim is not None and used is not None and lim < 2 ** 60:
            return max(0, lim - used)
    return None


def address_space_room():
    """Bytes the process may still map under its address-space limit (``RLIMIT_AS``, set by
    ``ulimit -v``): the soft limit less the process's present virtual size (``VmSize`` of
    /proc/self/status); None without such a limit or where the size is not known."""
    if resource is None:
        return None
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ValueError, OSError):
        return None
    if soft == resource.RLIM_INFINITY or soft < 0:
        return None
    size = None
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    parts = line.split()
                    size = int(parts[1]) * 1024 if parts[1].isdigit() else None
                    break
    except OSError:
        return None
    return None if size is None else max(0, soft - size)


def host_available_memory():
    """Bytes of host memory available: ``MemAvailable`` of /proc/meminfo (else the free
    physical pages of ``os.sysconf``), within the room left by the cgroup's memory limit
    and by the address-space limit (``ulimit -v``); None where none tells."""
    host = meminfo_available()
    if host is None:
        try:
            host = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            host = None
    for room in (cgroup_room(), address_space_room()):
        if room is not None:
            host = room if host is None else min(host, room)
    return host


def gpu_memory_info():
    """(free, total) bytes of the current CUDA device (CuPy); raises what CuPy raises
    (RuntimeError without CuPy)."""
    free, total = import_cupy().cuda.runtime.memGetInfo()
    return int(free), int(total)


def gpu_free_memory():
    """Bytes free on the current CUDA device, or None (no CuPy, no GPU, a CUDA error)."""
    try:
        return gpu_memory_info()[0]
    except Exception:  # noqa: BLE001 - no number rather than no run
        return None


def gpu_total_memory():
    """Bytes of memory of the current CUDA device (raises without a usable GPU)."""
    return gpu_memory_info()[1]


def available_memory(device="cpu"):
    """(host bytes available, GPU bytes free or None), None where unknown.

    ``device``: "cpu" | "gpu" | "auto" | a Device; the GPU is queried only for a GPU
    (:func:`host_available_memory`, :func:`gpu_free_memory`)."""
    gpu = gpu_free_memory() if device_kind(device) == "gpu" else None
    return host_available_memory(), gpu
