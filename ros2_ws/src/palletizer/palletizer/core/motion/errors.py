"""Motion errors: programming or configuration mistakes (plans that fail return a result)."""

from __future__ import annotations

from palletizer.core.errors import PalletizerError

__all__ = ['MotionError']


class MotionError(PalletizerError):
    """A motion request or parameter is invalid; the message names the value and what is allowed."""
