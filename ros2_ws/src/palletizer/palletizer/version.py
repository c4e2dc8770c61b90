"""Which code is running: the short git sha of the checkout the package runs from, and whether
its tracked files differ from that commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ['git_dirty', 'git_sha']


def _git(*args: str, timeout: float) -> str | None:
    """git's output in the package's checkout; None outside one (e.g. a non-symlinked install)."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ['git', '-C', str(here), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=timeout,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


def git_sha() -> str:
    """Short sha of HEAD ('' outside a git checkout)."""
    out = _git('rev-parse', '--short', 'HEAD', timeout=5)
    return '' if out is None else out.strip()


def git_dirty() -> bool | None:
    """Whether tracked files differ from HEAD (None outside a git checkout)."""
    out = _git('status', '--porcelain', '--untracked-files=no', timeout=10)
    return None if out is None else bool(out.strip())
