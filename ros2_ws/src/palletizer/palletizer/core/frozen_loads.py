"""Frozen load tables: the cartons of (level, seed) written to a file, so that benchmarks keep
their inputs when the load generator (core/loads.py, catalogue.yaml, levels.yaml) changes.

A table holds, per (level, seed), every carton's draw (type, size, mass, CoG offset, colour,
friction) and its arrival jitter (the staging offset the table and the conveyor apply, attempt
0, the only one the sources use). The truck's stand plan is the trailer's, made from the frozen
cartons and the seed (sim/sources/truck.py); it is not a draw and is not frozen.

`freeze` writes a table, `read` loads one, `mismatches` compares one with the generator (the
drift test), and `use` makes draw_load and staging_jitter answer from a table in this process
(docs/levels.md §2.6).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from palletizer.core import loads
from palletizer.core.config import Config, load_config
from palletizer.core.config.loader import config_dir
from palletizer.core.contracts import floats3
from palletizer.core.errors import ConfigError

__all__ = [
    'SCHEMA',
    'FrozenLoads',
    'freeze',
    'generator_hash',
    'install',
    'mismatches',
    'read',
    'refreeze_command',
    'use',
]

SCHEMA = 1
# What the draws are made from: the generator's code and the two files it reads.
_GENERATOR_FILES = ('catalogue.yaml', 'levels.yaml')


def generator_hash(root: str | Path | None = None) -> str:
    """sha256 of core/loads.py and configs' catalogue.yaml and levels.yaml (`root`: the
    configs folder, default the project's): the generator a table was frozen from."""
    h = hashlib.sha256()
    h.update(Path(loads.__file__).read_bytes())
    base = Path(root) if root is not None else config_dir()
    for name in _GENERATOR_FILES:
        h.update(name.encode())
        h.update((base / name).read_bytes())
    return h.hexdigest()


@dataclass(frozen=True)
class FrozenLoads:
    """A frozen table: (level, seed) -> the cartons' draws and their arrival jitter."""

    levels: tuple[int, ...]
    seeds: tuple[int, ...]
    generator: str
    draws: dict[tuple[int, int], tuple[loads.CartonDraw, ...]]
    jitter: dict[tuple[int, int], tuple[tuple[float, float, float], ...]]
    path: str = ''

    def __contains__(self, key: object) -> bool:
        return key in self.draws


def _draw_row(d: loads.CartonDraw) -> dict[str, Any]:
    return asdict(d)


def _draw_of(row: dict[str, Any], where: str) -> loads.CartonDraw:
    try:
        r, g, b, a = (float(v) for v in row['rgba'])
        return loads.CartonDraw(
            index=int(row['index']),
            package_id=str(row['package_id']),
            type_name=str(row['type_name']),
            dims=floats3(row['dims']),
            mass=float(row['mass']),
            cog_offset=floats3(row['cog_offset']),
            rgba=(r, g, b, a),
            friction=floats3(row['friction']),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f'{where}: not a carton draw ({exc!r})') from None


def freeze(
    levels: Iterable[int], seeds: Iterable[int], config: Config | None = None
) -> dict[str, Any]:
    """The table of `levels` x `seeds` as a JSON-ready mapping, drawn by the generator now."""
    cfg = config or load_config()
    levels, seeds = sorted(set(levels)), sorted(set(seeds))
    with use(None):  # the generator's draws, whatever table this process answers from
        return _freeze(levels, seeds, cfg)


def _freeze(levels: list[int], seeds: list[int], cfg: Config) -> dict[str, Any]:
    out: dict[str, Any] = {
        'schema': SCHEMA,
        'generator': generator_hash(),
        'levels': levels,
        'seeds': seeds,
        'loads': {},
    }
    for level in levels:
        cfg.level(level)  # an unknown level is named here
        for seed in seeds:
            draws = loads.draw_load(level, seed, cfg)
            out['loads'][f'{level}:{seed}'] = {
                'cartons': [_draw_row(d) for d in draws],
                'jitter': [
                    list(loads.staging_jitter(level, seed, d.index, 0, cfg)) for d in draws
                ],
            }
    return out


def read(path: str | Path) -> FrozenLoads:
    """A table from its file; a wrong schema or a malformed entry is an error naming it."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f'{p}: cannot read a frozen load table ({exc})') from None
    if doc.get('schema') != SCHEMA:
        raise ConfigError(
            f'{p}: schema = {doc.get("schema")!r}; expected {SCHEMA} '
            f'(refreeze with: {refreeze_command(p, doc.get("levels", []), doc.get("seeds", []))})'
        )
    draws: dict[tuple[int, int], tuple[loads.CartonDraw, ...]] = {}
    jitter: dict[tuple[int, int], tuple[tuple[float, float, float], ...]] = {}
    for key, entry in doc['loads'].items():
        level, seed = (int(v) for v in key.split(':'))
        rows = entry['cartons']
        draws[level, seed] = tuple(_draw_of(r, f'{p} {key}') for r in rows)
        jitter[level, seed] = tuple(
            (float(j[0]), float(j[1]), float(j[2])) for j in entry['jitter']
        )
        if len(jitter[level, seed]) != len(rows):
            raise ConfigError(f'{p} {key}: {len(rows)} cartons but {len(entry["jitter"])} jitters')
    return FrozenLoads(
        tuple(doc['levels']), tuple(doc['seeds']), str(doc['generator']), draws, jitter, str(p)
    )


def refreeze_command(path: str | Path, levels: Iterable[int], seeds: Iterable[int]) -> str:
    """The command that writes `path` again from the generator."""
    lv = ' '.join(str(v) for v in levels)
    s = sorted(seeds)
    span = f'{s[0]}-{s[-1]}' if s and s == list(range(s[0], s[-1] + 1)) else ','.join(map(str, s))
    return f'scripts/loads freeze --levels {lv} --seeds {span} --out {path}'


def mismatches(table: FrozenLoads, config: Config | None = None, limit: int = 5) -> list[str]:
    """Where the generator no longer draws what `table` holds (at most `limit` lines; empty
    when every entry matches)."""
    cfg = config or load_config()
    with use(None):  # compare with the generator, not with a table this process answers from
        return _mismatches(table, cfg, limit)


def _mismatches(table: FrozenLoads, cfg: Config, limit: int) -> list[str]:
    out: list[str] = []
    for (level, seed), frozen in sorted(table.draws.items()):
        now = loads.draw_load(level, seed, cfg)
        jit = [loads.staging_jitter(level, seed, d.index, 0, cfg) for d in now]
        if tuple(now) != frozen:
            first = next(
                (
                    f'carton {a.index}: {a} != {b}'
                    for a, b in zip(frozen, now, strict=False)
                    if a != b
                ),
                f'{len(frozen)} cartons frozen, {len(now)} drawn',
            )
            out.append(f'level {level} seed {seed}: {first}')
        elif tuple(jit) != table.jitter[level, seed]:
            out.append(f'level {level} seed {seed}: the arrival jitter differs')
        if len(out) >= limit:
            break
    return out


def install(path: str | Path) -> FrozenLoads:
    """Read the table at `path` and answer from it in this process from now on (a benchmark
    worker's set-up)."""
    table = read(path)
    loads.set_frozen_table(table)
    return table


@contextmanager
def use(table: FrozenLoads | None) -> Iterator[None]:
    """Within the block, draw_load and staging_jitter answer from `table` for the (level,
    seed) pairs it holds, and from the generator otherwise."""
    before = loads.frozen_table()
    loads.set_frozen_table(table)
    try:
        yield
    finally:
        loads.set_frozen_table(before)
