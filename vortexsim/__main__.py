"""``python -m vortexsim``: the ``vortexsim`` command (:mod:`vortexsim.cli.command`)."""
import sys

from .cli import main

sys.exit(main())
