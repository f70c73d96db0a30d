"""Run output: netCDF snapshots (each a checkpoint), the diagnostics file, atomic writes, plots.

* :mod:`.snapshot`: ``write_snapshot``, ``read_snapshot`` (refuses truncated, corrupted,
  forged or foreign files with :class:`SnapshotError`), ``open_netcdf``
* :mod:`.netcdf_header`: what a netCDF file declares, read before any value (a regular
  file; variables no larger than the file can hold; dimensions as the file records them)
* :mod:`.verify`: ``viewed_snapshot``, a snapshot for the commands that only look at it
  (checksum verified, or a warning with ``--no-verify``)
* :mod:`.validate`: checks of values read from files (type, shape, range, strict JSON)
  and ``printable`` (text from a file for a terminal)
* :mod:`.diagnostics`: ``DiagnosticsLog`` (``diagnostics.nc``, one row per diagnostic time)
* :mod:`.files`: ``atomic_path`` (temporary name, fsync, rename), ``write_text``,
  ``remove_stale_tmp``
* :mod:`.plot`: ``plot_run``, ``plot_rows`` (``plot.png``; needs matplotlib)
* :mod:`.lattice_field`: ``write_velocity_field``, ``read_velocity_field`` (a velocity
  field on the n³ lattice of the periodic box, e.g. ``initial_field.nc``; the format that
  ``vortexsim.validation.spectral_ns`` reads and writes)
* :mod:`.writers`: the run loop's output writers ``SnapshotWriter`` (checkpoints),
  ``DiagnosticsWriter``, ``PlotWriter``; ``run_writers``, ``output_intervals``

This package knows nothing of the solver: it takes state dicts
(:meth:`vortexsim.Simulation.state_dict`), configs and diagnostics rows; the writers use
the simulation only through the run loop's protocol (:meth:`vortexsim.Simulation.run`).
"""
from .files import atomic_path, fsync_dir, remove_stale_tmp, write_text
from .snapshot import (FORMAT, FORMAT_VERSION, Snapshot, SnapshotError, open_netcdf,
                       read_snapshot, write_snapshot)
from .diagnostics import DIAGNOSTICS_FORMAT, DiagnosticsLog, read_rows
from .writers import (DiagnosticsWriter, PlotWriter, SnapshotWriter, output_intervals,
                      run_writers)

__all__ = ["atomic_path", "write_text", "fsync_dir", "remove_stale_tmp", "FORMAT",
           "FORMAT_VERSION", "Snapshot", "SnapshotError", "open_netcdf", "read_snapshot",
           "write_snapshot",
           "DIAGNOSTICS_FORMAT", "DiagnosticsLog", "read_rows", "SnapshotWriter",
           "DiagnosticsWriter", "PlotWriter", "run_writers", "output_intervals"]
