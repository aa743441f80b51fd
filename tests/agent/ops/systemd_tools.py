"""systemd-analyze for the tests; it runs without systemd as PID 1 (package ``systemd``)."""

from __future__ import annotations

import shutil

__all__ = ["systemd_analyze"]


def systemd_analyze() -> str:
    """The path of systemd-analyze, or a failure that says how to get it (never a skip)."""
    found = shutil.which("systemd-analyze")
    if found is None:
        raise AssertionError(
            "systemd-analyze is missing: scripts/bootstrap installs it (apt-get install systemd)"
        )
    return found
