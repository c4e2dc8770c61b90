"""Outboxes of runs whose process died: close their open episode and ship what they left."""

from __future__ import annotations

from pathlib import Path

from palletizer.telemetry.replica.backfill import reconcile
from palletizer.telemetry.replica.outbox import OUTBOX_FILE, Outbox, owner_alive
from palletizer.telemetry.replica.rows import ReplicaError
from palletizer.telemetry.replica.sink import close_orphan

__all__ = ['adopt_orphans', 'recover_run']


def recover_run(run_dir: Path, reason: str) -> tuple[bool, str]:
    """Close a dead run's open episode in its outbox; (rows to ship?, a line or '').

    ReplicaError when the run's writer is alive.
    """
    if owner_alive(run_dir):
        raise ReplicaError(f'{run_dir}: its run is still being written; try again after it ends')
    with Outbox(run_dir, create=False) as ob:
        if ob.get('closed') and ob.counts()['pending'] == 0:
            return False, ''  # closed by its writer (or recovered) and shipped: nothing to do
    missed = reconcile(run_dir)
    seed = close_orphan(run_dir, reason)
    with Outbox(run_dir, create=False) as ob:
        waiting = ob.counts()['pending']
    notes = []
    if missed:
        notes.append(f'{missed} rows found on disk only were queued')
    if seed is not None:
        notes.append(f'episode seed {seed} was left running; closed as aborted')
    note = f'{run_dir.name}: {"; ".join(notes)}' if notes else ''
    return waiting > 0, note


def adopt_orphans(runs_dir: Path | str, own: Path | str = '') -> list[tuple[Path, str]]:
    """Run folders under runs_dir (not `own`) whose dead writer left rows to ship.

    Each is (folder, line for the log or ''); their open episodes are closed as aborted with
    the reason recorded. A live run, or one another process is recovering, is skipped.
    """
    out = []
    own_path = Path(own).absolute() if own else None
    for box in sorted(Path(runs_dir).glob(f'*/{OUTBOX_FILE}')):
        run_dir = box.parent.absolute()
        if run_dir == own_path:
            continue
        reason = 'its run process died; closed at the next start'
        if own_path is not None:
            reason += f' ({own_path.name})'
        try:
            ship, note = recover_run(run_dir, reason)
        except ReplicaError:
            continue
        if ship or note:
            out.append((run_dir, note))
    return out
