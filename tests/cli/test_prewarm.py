"""The warm-up of the writers' libraries on a thread during a GPU run's set-up
(``vortexsim.cli.prewarm``): it imports them, never raises, and a CPU run takes none."""
import sys
import threading

from vortexsim.cli.prewarm import Prewarm
from vortexsim.cli.run import _prewarm


def test_the_warm_up_imports_the_netcdf_stack_on_a_thread_of_its_own():
    seen = []
    import vortexsim.output.snapshot as snapshot
    real = snapshot.preload_netcdf

    def spy():
        seen.append(threading.current_thread().name)
        return real()
    snapshot.preload_netcdf, saved = spy, snapshot.preload_netcdf
    try:
        Prewarm(plot=False).join()
    finally:
        snapshot.preload_netcdf = saved
    assert seen == ["vortexsim-prewarm"]
    assert "xarray" in sys.modules and "netCDF4" in sys.modules


def test_a_failing_warm_up_is_left_to_the_writers(monkeypatch):
    import vortexsim.output.snapshot as snapshot

    def missing():
        raise ImportError("no netCDF4")
    monkeypatch.setattr(snapshot, "preload_netcdf", missing)
    Prewarm(plot=True).join()                # no exception: the writers report it


def test_a_cpu_run_takes_no_warm_up():
    assert _prewarm("cpu", {"plot": True}) is None
