"""Validation of vortexsim against references, used by the scripts of
``benchmarks/validation/`` and by the tests:

* :mod:`.spectral_ns`: a pseudo-spectral Navier–Stokes solver of the periodic box (the
  reference of the Taylor–Green and isotropic-turbulence cases) and its command line;
* :mod:`.compare_isotropic`: a vortexsim run of decaying isotropic turbulence against a
  spectral_ns run from the same initial field;
* :mod:`.resolution_study`: the ring cases at three resolutions, their event times and
  spreads; :mod:`.ring_events`: the ring records and event times it reads;
* :mod:`.records`: the device, environment and JSON result file of a run of these tools
  (and of the benchmark scripts).

The top layer of the package: it may import any layer below, nothing imports it.
"""
