"""`scripts/loads`: freeze the loads of a level and seed range into a table, or check tables
against the generator (core/frozen_loads.py; docs/levels.md §2.6).

    scripts/loads freeze --levels 11 12 --seeds 1-50 --out benchmarks/loads/v1.json
    scripts/loads check [TABLE ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from palletizer.core.errors import InvalidValue, PalletizerError

__all__ = ['DEFAULT_TABLE', 'GENERATOR', 'check_loads', 'main', 'use_loads']

# The table the benchmarks read by default: every level, seeds 1-50 (the development range).
DEFAULT_TABLE = Path('benchmarks/loads/v1.json')
# `--loads generator`: draw every load now instead of reading a table.
GENERATOR = 'generator'


def check_loads(spec: str, levels: Sequence[int], seeds: Sequence[int]) -> str:
    """A benchmark's `--loads`: GENERATOR, or a table that holds every (level, seed) it runs.
    Returns what the results record as their loads; a missing table or pair is an error that
    says how to freeze it."""
    if spec == GENERATOR:
        return GENERATOR
    from palletizer.core.frozen_loads import read, refreeze_command

    table = read(spec)
    missing = [(lv, s) for lv in levels for s in seeds if (lv, s) not in table]
    if missing:
        lv, s = missing[0]
        raise InvalidValue(
            f'--loads {spec}: the table lacks {len(missing)} of the (level, seed) pairs to run, '
            f'level {lv} seed {s} first; freeze them with '
            f'`{refreeze_command(spec, sorted({m[0] for m in missing}), sorted({m[1] for m in missing}))}` '
            f'(a new file), or run with --loads {GENERATOR}'
        )
    return f'{spec} (generator {table.generator[:12]})'


def use_loads(spec: str) -> None:
    """A benchmark worker's initializer: answer draw_load from the table `spec` (none for
    GENERATOR)."""
    if spec != GENERATOR:
        from palletizer.core.frozen_loads import install

        install(spec)


def _freeze(args: argparse.Namespace) -> int:
    from palletizer.cli.seeds import parse_seeds
    from palletizer.core.config import load_config
    from palletizer.core.frozen_loads import freeze

    cfg = load_config()
    levels = args.levels or sorted(cfg.levels)
    seeds = parse_seeds(args.seeds)
    if max(seeds) > 100 and not args.reserved:
        raise InvalidValue(
            f'--seeds {args.seeds}: seeds above 100 are reserved for independent checks; '
            'expected seeds 1-100 (or --reserved)'
        )
    n = len(levels) * len(seeds)
    print(
        f'[loads] freezing {len(levels)} levels x {len(seeds)} seeds ({n} loads)', file=sys.stderr
    )
    doc = freeze(levels, seeds, cfg)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + '.tmp')
    # One load per line: a refreeze shows in a diff as the loads that changed.
    lines = [f'  {json.dumps(k)}: {json.dumps(v)}' for k, v in doc['loads'].items()]
    head = {k: v for k, v in doc.items() if k != 'loads'}
    text = json.dumps(head)[:-1] + ', "loads": {\n' + ',\n'.join(lines) + '\n}}\n'
    tmp.write_text(text)
    tmp.replace(out)
    print(json.dumps({'table': str(out), 'loads': n, 'generator': doc['generator']}))
    return 0


def _check(args: argparse.Namespace) -> int:
    from palletizer.core.frozen_loads import mismatches, read, refreeze_command

    paths = [Path(p) for p in args.tables] or sorted(DEFAULT_TABLE.parent.glob('*.json'))
    bad = 0
    for p in paths:
        table = read(p)
        found = mismatches(table)
        if found:
            bad += 1
            print(f'[loads] {p}: the generator no longer draws these loads:', file=sys.stderr)
            for line in found:
                print(f'  {line}', file=sys.stderr)
            print(f'  refreeze: {refreeze_command(p, table.levels, table.seeds)}', file=sys.stderr)
        else:
            print(f'[loads] {p}: {len(table.draws)} loads match the generator', file=sys.stderr)
    print(json.dumps({'tables': len(paths), 'drifted': bad}))
    return 1 if bad else 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='scripts/loads', description=__doc__.split('\n\n')[0])
    sub = ap.add_subparsers(dest='cmd', required=True)
    f = sub.add_parser('freeze', help='write the loads of a level and seed range to a table')
    f.add_argument('--levels', type=int, nargs='+', help='level ids (default: every level)')
    f.add_argument('--seeds', default='1-50', help='seed range, e.g. 1-50 (default 1-50)')
    f.add_argument('--out', default=str(DEFAULT_TABLE), help=f'default {DEFAULT_TABLE}')
    f.add_argument('--reserved', action='store_true', help='allow seeds above 100')
    c = sub.add_parser('check', help='compare tables with the generator (exit 1 on drift)')
    c.add_argument('tables', nargs='*', help=f'default: every table in {DEFAULT_TABLE.parent}')
    args = ap.parse_args(argv)
    try:
        return _freeze(args) if args.cmd == 'freeze' else _check(args)
    except PalletizerError as exc:
        print(f'scripts/loads: {exc}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
