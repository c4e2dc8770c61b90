"""scripts/replicate: ship runs to the replica database: drain their outboxes, or backfill.

    scripts/replicate runs/<run> [runs/<run> ...] [--telemetry postgres|supabase]

A run with an outbox (a replica run that ended before its rows were shipped, or whose process
died) is drained; an episode its dead process left open is closed as aborted first. A
disk-only run gets an outbox from its JSONL files, then is drained. Rows land once however
often this runs. Prints progress, then one line per run; exit 0 when every row is in the
database, 1 when rows are left (the database went away), 2 on bad input or a replica that
cannot work (credentials, schema).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from palletizer.core.config import load_config
from palletizer.core.errors import PalletizerError
from palletizer.telemetry.replica.backfill import backfill
from palletizer.telemetry.replica.credentials import choose_backend
from palletizer.telemetry.replica.orphans import recover_run
from palletizer.telemetry.replica.outbox import OUTBOX_FILE, Outbox
from palletizer.telemetry.replica.replicator import Replicator


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog='scripts/replicate',
        description='Ship runs to the telemetry replica: drain their outboxes, or backfill.',
    )
    p.add_argument('runs', nargs='+', type=Path, help='run folders (runs/<stamp>-<tag>)')
    p.add_argument(
        '--telemetry',
        choices=('postgres', 'supabase'),
        help='the replica (default: postgres when PALLETIZER_PG_DSN is set, else supabase)',
    )
    p.add_argument(
        '--timeout', type=float, default=600.0, help='[s] give up waiting after this long'
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    opts = _parser().parse_args(argv)
    cfg = load_config().telemetry.replica
    modes = [opts.telemetry] if opts.telemetry else ['postgres', 'supabase']
    choice = None
    for mode in modes:
        choice = choose_backend(mode, cfg)
        if choice.backend is not None:
            break
    assert choice is not None
    if choice.backend is None:
        print(f'replicate: error: {choice.line}', file=sys.stderr)
        return 2
    print(f'replicate: {choice.line}', flush=True)
    dirs = []
    for run_dir in opts.runs:
        run_dir = run_dir.absolute()
        try:
            if not run_dir.is_dir():
                raise PalletizerError(f'{run_dir}: not a folder')
            if not (run_dir / OUTBOX_FILE).exists():
                n = backfill(run_dir)
                print(f'{run_dir.name}: backfilled {n} rows from its JSONL files', flush=True)
            else:
                _, note = recover_run(run_dir, 'its run process died; closed by scripts/replicate')
                if note:
                    print(note, flush=True)
        except PalletizerError as exc:
            print(f'replicate: error: {exc}', file=sys.stderr)
            return 2
        dirs.append(run_dir)
    totals = {}
    for d in dirs:
        with Outbox(d, create=False) as ob:
            totals[d] = ob.counts()['pending']
    total = sum(totals.values())

    def log(level: str, line: str) -> None:
        print(line, file=sys.stderr if level == 'error' else sys.stdout, flush=True)

    rep = Replicator(
        choice.backend,
        log,
        batch=cfg.batch,
        backoff_s=cfg.backoff_s,
    )
    for d in dirs:
        rep.add(d)
    t0 = time.monotonic()
    rep.start()
    done = False
    while time.monotonic() - t0 < opts.timeout:
        done = rep.drain(min(2.0, opts.timeout))
        print(f'  {rep.shipped}/{total} rows shipped ({rep.state})', flush=True)
        if done or rep.state == 'disabled':
            break
    rep.stop(5.0)
    took = time.monotonic() - t0
    left = 0
    for d in dirs:
        with Outbox(d, create=False) as ob:
            c = ob.counts()
        left += c['pending']
        print(
            f'{d.name}: {c["shipped"]} rows in the database, {c["rejected"]} refused, '
            f'{c["pending"]} waiting'
        )
    if rep.state == 'disabled':
        return 2
    print(f'replicate: {rep.shipped} rows shipped in {took:.2f} s; {left} waiting')
    return 0 if left == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
