"""The project's exception hierarchy: every error raised on purpose derives from PalletizerError."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ['ConfigError', 'GraphError', 'PalletizerError', 'close_match']


class PalletizerError(Exception):
    """Root of every error this project raises on purpose."""


class ConfigError(PalletizerError):
    """A configuration file or value is invalid; the message names file, key, value and what is allowed."""


class GraphError(PalletizerError):
    """A launch argument or graph description is invalid."""


def close_match(name: str, allowed: Iterable[str]) -> str:
    """Return ' (did you mean X?)' when `name` looks like a misspelling of an allowed value."""
    hits = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1, cutoff=0.6)
    return f' (did you mean {hits[0]!r}?)' if hits else ''
