"""The item sequences of the benchmark: the 125 integer item types and the seeded random
sequences (RS) drawn from them, frozen into a versioned table (docs/bpp.md §10.2).

A table holds, per seed, the sequence's items; its header holds the schema version, the setting
(bin size, sequence length) and the generator hash (sha256 of this module's source), so a change
of the generator shows up as a mismatch (`mismatches`, the drift test) and the table is written
again with `refreeze_command`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from palletizer.core.bpp.container import BIN_SIZE, Item
from palletizer.core.errors import ConfigError

__all__ = [
    'DEFAULT_TABLE',
    'ITEM_TYPES',
    'SCHEMA',
    'SEQUENCE_LENGTH',
    'SequenceTable',
    'draw_sequence',
    'freeze',
    'generator_hash',
    'mismatches',
    'read',
    'refreeze_command',
    'write',
]

SCHEMA = 1
# The table `scripts/bench bpp` reads by default (relative to the repository root).
DEFAULT_TABLE = Path('benchmarks/bpp/v1.json')
# Items per sequence: far more than a 10 x 10 x 10 bin holds (the mean item is 27 cells, so 100
# items are ~2700 cells); an episode that runs out of items ends as `exhausted`.
SEQUENCE_LENGTH = 100

# Every (l, w, h) with each side in 1..5 [cells]: 125 types, in lexicographic order.
ITEM_TYPES: tuple[Item, ...] = tuple(
    (a, b, c) for a in range(1, 6) for b in range(1, 6) for c in range(1, 6)
)


def draw_sequence(seed: int, n: int = SEQUENCE_LENGTH) -> list[Item]:
    """n items, each type drawn uniformly and independently (numpy PCG64 seeded with `seed`)."""
    rng = np.random.default_rng(seed)
    return [ITEM_TYPES[int(k)] for k in rng.integers(0, len(ITEM_TYPES), size=n)]


def generator_hash() -> str:
    """sha256 of this module's source: the generator a table was frozen from."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


@dataclass(frozen=True)
class SequenceTable:
    """A frozen table: seed -> its item sequence."""

    seeds: tuple[int, ...]
    length: int
    bin_size: tuple[int, int, int]
    generator: str
    sequences: dict[int, tuple[Item, ...]]
    path: str = ''


def freeze(seeds: Iterable[int], length: int = SEQUENCE_LENGTH) -> dict[str, Any]:
    """The table of `seeds` as a JSON-ready mapping, drawn by the generator now."""
    s = sorted(set(seeds))
    return {
        'schema': SCHEMA,
        'generator': generator_hash(),
        'bin_size': list(BIN_SIZE),
        'length': length,
        'seeds': s,
        'sequences': {str(k): [list(i) for i in draw_sequence(k, length)] for k in s},
    }


def write(doc: dict[str, Any], path: str | Path) -> Path:
    """Write a frozen table, one sequence per line (a refreeze diffs as the sequences that
    changed); atomically, through a temporary file."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    head = {k: v for k, v in doc.items() if k != 'sequences'}
    lines = [f'  {json.dumps(k)}: {json.dumps(v)}' for k, v in doc['sequences'].items()]
    text = json.dumps(head)[:-1] + ', "sequences": {\n' + ',\n'.join(lines) + '\n}}\n'
    tmp = out.with_suffix(out.suffix + '.tmp')
    tmp.write_text(text)
    tmp.replace(out)
    return out


def refreeze_command(path: str | Path, seeds: Iterable[int]) -> str:
    """The command that writes `path` again from the generator."""
    s = sorted(seeds)
    span = f'{s[0]}-{s[-1]}' if s and s == list(range(s[0], s[-1] + 1)) else ','.join(map(str, s))
    return f'scripts/bench bpp --freeze --seeds {span} --table {path}'


def read(path: str | Path) -> SequenceTable:
    """A table from its file; a wrong schema or a malformed entry is an error naming it."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f'{p}: cannot read a frozen sequence table ({exc})') from None
    if doc.get('schema') != SCHEMA:
        raise ConfigError(
            f'{p}: schema = {doc.get("schema")!r}; expected {SCHEMA} '
            f'(refreeze with: {refreeze_command(p, doc.get("seeds", []))})'
        )
    try:
        size = tuple(int(v) for v in doc['bin_size'])
        seqs: dict[int, tuple[Item, ...]] = {}
        for key, rows in doc['sequences'].items():
            items = tuple((int(r[0]), int(r[1]), int(r[2])) for r in rows)
            seqs[int(key)] = items
        table = SequenceTable(
            tuple(int(s) for s in doc['seeds']),
            int(doc['length']),
            (size[0], size[1], size[2]),
            str(doc['generator']),
            seqs,
            str(p),
        )
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ConfigError(f'{p}: not a frozen sequence table ({exc!r})') from None
    missing = [s for s in table.seeds if s not in seqs]
    if missing:
        raise ConfigError(f'{p}: seed {missing[0]} is listed but has no sequence')
    return table


def mismatches(table: SequenceTable, limit: int = 5) -> list[str]:
    """Where the generator no longer draws what `table` holds (at most `limit` lines; empty when
    every sequence matches). The hash is compared too: a changed generator that still draws the
    same sequences is reported, so the header stays true."""
    out: list[str] = []
    if tuple(table.bin_size) != BIN_SIZE:
        out.append(f'bin size {list(table.bin_size)} frozen, {list(BIN_SIZE)} now')
    for seed in table.seeds:
        now = tuple(draw_sequence(seed, table.length))
        frozen = table.sequences[seed]
        if now != frozen:
            k = next(k for k, (a, b) in enumerate(zip(frozen, now, strict=False)) if a != b)
            out.append(f'seed {seed}: item {k} frozen {frozen[k]}, drawn {now[k]}')
        if len(out) >= limit:
            return out
    if not out and table.generator != generator_hash():
        out.append(
            f'the generator hash differs ({table.generator[:12]} frozen, '
            f'{generator_hash()[:12]} now) although the sequences match'
        )
    return out
