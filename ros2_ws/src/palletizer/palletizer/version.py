"""Which code is running: the short git sha of the checkout the package runs from."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ['git_sha']


def git_sha() -> str:
    """Short sha of HEAD ('' outside a git checkout, e.g. a non-symlinked install)."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ['git', '-C', str(here), 'rev-parse', '--short', 'HEAD'],
            capture_output=True,
            text=True,
            check=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return ''
    return out.stdout.strip()
