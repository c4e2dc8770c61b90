"""Seed ranges on the command line: the one parser of `--seeds 1-50`, `3`, `1-3,7,9-10`."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence

from palletizer.core.errors import InvalidValue

__all__ = ['RESERVED_ABOVE', 'check_levels_and_first_seeds', 'dev_seeds', 'parse_seeds']

# Seeds above this are reserved for independent checks: never run, tuned or reported on in
# development.
RESERVED_ABOVE = 100


def check_levels_and_first_seeds(
    parser: argparse.ArgumentParser,
    levels: Sequence[int],
    seeds: int,
    known: Iterable[int],
    seed_limit: int,
) -> None:
    """A benchmark's `--levels` (each a configured level) and `--seeds N` (seeds 1-N, N at
    most seed_limit: the seeds above are reserved); parser.error naming what is allowed."""
    known = sorted(known)
    bad = [lv for lv in levels if lv not in known]
    if bad:
        parser.error(f'--levels {bad[0]}: not a level; expected some of {known}')
    if not 1 <= seeds <= seed_limit:
        parser.error(f'--seeds {seeds}; expected 1 to {seed_limit} (seeds above are reserved)')


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


def dev_seeds(
    parser: argparse.ArgumentParser, text: str, reserved: bool, hint: str = 'develop on 1-50'
) -> list[int]:
    """A command's `--seeds TEXT` (parse_seeds), refusing an empty set and, without `reserved`
    (the command's --reserved), any seed above RESERVED_ABOVE; parser.error naming why."""
    try:
        seeds = parse_seeds(text)
    except ValueError as exc:
        parser.error(str(exc))
    if not seeds:
        parser.error(f'--seeds {text}: no seeds')
    if max(seeds) > RESERVED_ABOVE and not reserved:
        parser.error(
            f'--seeds {text}: seeds above {RESERVED_ABOVE} are reserved for independent checks; '
            f'{hint} (pass --reserved only for such a check)'
        )
    return seeds
