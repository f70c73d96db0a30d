"""``python -m vortexsim``: the ``vortexsim`` command (:mod:`vortexsim.cli.main`)."""
import sys

from .cli import main

sys.exit(main())
