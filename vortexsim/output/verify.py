"""The snapshots of the commands that only look at a run (``render``, ``export``, ``info
--no-verify``): each snapshot's checksum is verified before it is used, and a mismatch is
refused in one line that names the file and ``--no-verify``; with ``--no-verify`` the
mismatch is a one-line warning and the file is used as it is.

Only the checksum is verified here: the values are not checked as for a restart
(:func:`.snapshot.read_snapshot`), since a picture or a description of a file needs no
more than what it shows; each command checks the values it uses (``render``: finite
positions)."""
from __future__ import annotations

import logging

from .snapshot import ChecksumMismatch, read_snapshot_unverified

logger = logging.getLogger(__name__)

__all__ = ["viewed_snapshot", "NO_VERIFY_HELP"]

#: the help of the ``--no-verify`` option of the viewing commands
NO_VERIFY_HELP = ("read snapshots whose checksum does not match (corrupted or edited "
                  "files) with a warning instead of refusing them")


def viewed_snapshot(path, no_verify=False):
    """The :class:`~.snapshot.Snapshot` of ``path``, its checksum verified: a mismatch
    raises :class:`~.snapshot.ChecksumMismatch` (one line, naming the file and
    ``--no-verify``), or with ``no_verify`` logs one warning line and returns the
    snapshot as it is.  Every other problem of the file is a
    :class:`~.snapshot.SnapshotError` as for a restart (missing, not a regular file,
    truncated, foreign, variables that declare more than the file holds)."""
    snap, mismatch = read_snapshot_unverified(path)
    if mismatch:
        if not no_verify:
            raise ChecksumMismatch(f"{mismatch} --no-verify reads it anyway.")
        logger.warning("%s Read anyway (--no-verify).", mismatch)
    return snap
