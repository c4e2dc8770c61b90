"""The one decorator every motion kernel is compiled with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba

__all__ = ['njit']

_F = TypeVar('_F', bound=Callable[..., Any])


def njit(fn: _F) -> _F:
    """numba's njit, cached on disk and without the GIL, typed as the function it compiles.

    numba ships no type hints: its dispatcher would make every kernel, and all that calls one,
    untyped for the type checker. The compiled dispatcher is called exactly as the function.
    """
    return cast(_F, numba.njit(cache=True, nogil=True)(fn))
