"""postprocess: analyse and plot vortexsim run directories (xarray, matplotlib).

Built on vortexsim's readers only.  ``open_run`` (snapshots, lazy), ``open_diagnostics``,
``open_spectra`` (:mod:`postprocess.run`); ``track_rings``, ``spectral_slope``
(:mod:`postprocess.rings`); the ``plot_*`` functions (:mod:`postprocess.plots`, need
matplotlib: ``pip install 'vortexsim[viz]'``); ``summarize`` and the CLI commands
``vortexsim analyze`` and ``vortexsim plot`` (:mod:`postprocess.cli`).
"""
from .cli import add_command, summarize
from .plots import (plot_comparison, plot_dissipation, plot_energy, plot_rings, plot_run,
                    plot_spectra)
from .rings import spectral_slope, track_rings
from .run import check_run_dir, open_diagnostics, open_run, open_spectra

__all__ = ["open_run", "open_diagnostics", "open_spectra", "check_run_dir", "track_rings",
           "spectral_slope", "plot_energy", "plot_rings", "plot_spectra", "plot_dissipation",
           "plot_comparison", "plot_run", "summarize", "add_command"]
