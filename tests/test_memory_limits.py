"""The memory guard sees the process's address-space limit (``ulimit -v``,
vortexsim/backend/memory.py): a run that cannot fit under it is refused in one line before
anything is allocated or written, not ended by a MemoryError traceback."""
from __future__ import annotations

import subprocess
import sys

LIMIT = 4 * 1024 ** 3          # [B] RLIMIT_AS of the child processes


def _limited(code):
    """Run ``code`` in a Python child whose address space is limited to LIMIT."""
    prelude = (f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({LIMIT}, "
               "resource.RLIM_INFINITY)); ")
    return subprocess.run([sys.executable, "-c", prelude + code], capture_output=True,
                          text=True, timeout=300)


def test_the_address_space_limit_bounds_the_memory_available():
    out = _limited("from vortexsim.backend import memory as m; "
                   "print(m.address_space_room(), m.host_available_memory())")
    assert out.returncode == 0, out.stderr
    room, host = (int(v) for v in out.stdout.split())
    assert 0 < room < LIMIT and host <= room


def test_a_run_beyond_the_limit_is_refused_in_one_line(tmp_path):
    run_dir = tmp_path / "r"
    out = _limited("import sys; from vortexsim.cli import main; sys.exit(main(["
                   "'run', 'single_ring', '--set', 'tracers_per_ring=20000000', '--steps', "
                   f"'1', '--device', 'cpu', '-q', '--out', {str(run_dir)!r}]))")
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "available" in lines[0] and "Traceback" not in out.stderr
    assert not run_dir.exists()
