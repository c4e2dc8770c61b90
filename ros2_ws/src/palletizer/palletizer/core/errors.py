"""The project's exception hierarchy: every error raised on purpose derives from PalletizerError."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    'TelemetryError',
    'ConfigError',
    'GraphError',
    'InvalidType',
    'InvalidValue',
    'PalletizerError',
    'UnknownKey',
    'close_match',
]


class PalletizerError(Exception):
    """Root of every error this project raises on purpose."""


class ConfigError(PalletizerError):
    """A configuration file or value is invalid; the message names file, key, value and what is allowed."""


class GraphError(PalletizerError):
    """A launch argument or graph description is invalid."""


class InvalidValue(PalletizerError, ValueError):
    """An argument's value is out of its range or form; the message names it and what is allowed.

    Also a ValueError: these sites raised the built-in before the hierarchy covered them, and
    their callers still catch it (argparse turns a ValueError of a `type=` function into a usage
    error; `except ValueError` handlers and tests that expect one keep working).
    """


class InvalidType(PalletizerError, TypeError):
    """An argument is not of a kind the call accepts; the message names it and what is expected.

    Also a TypeError, for the callers and tests that caught the built-in before.
    """


class TelemetryError(PalletizerError):
    """A telemetry row, file or call is invalid; the message names the value and what is allowed."""


class UnknownKey(PalletizerError, KeyError):
    """A lookup by a name or id that is not there; the message names it and what is there.

    Also a KeyError, so a caller that caught the plain lookup error still does. Its text is the
    message itself, not KeyError's quoted repr of it.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ''


def close_match(name: str, allowed: Iterable[str]) -> str:
    """Return ' (did you mean X?)' when `name` looks like a misspelling of an allowed value."""
    hits = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1, cutoff=0.6)
    return f' (did you mean {hits[0]!r}?)' if hits else ''
