"""Seed ranges on the command line: the one parser of `--seeds 1-50`, `3`, `1-3,7,9-10`."""

from __future__ import annotations

from palletizer.core.errors import InvalidValue

__all__ = ['parse_seeds']


def parse_seeds(text: str) -> list[int]:
    """'1-50', '3', '1-3,7,9-10' -> sorted seeds; InvalidValue (a ValueError) naming what is allowed."""
    seeds: set[int] = set()
    for part in text.split(','):
        a, sep, b = part.strip().partition('-')
        try:
            lo = int(a)
            hi = int(b) if sep else lo
        except ValueError:
            raise InvalidValue(
                f'seeds {text!r}: {part!r} is not N or A-B; expected e.g. 1-50 or 1-3,7'
            ) from None
        if lo < 0 or hi < lo:
            raise InvalidValue(f'seeds {text!r}: {part!r}; expected 0 <= A <= B')
        seeds.update(range(lo, hi + 1))
    return sorted(seeds)
