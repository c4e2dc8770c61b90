"""The telemetry replica: a run's rows, queued on disk in its outbox, shipped to a database.

Disk is the source of truth (telemetry/run.py writes the JSONL files first); every row is then
queued in runs/<run>/outbox.sqlite, and a Replicator thread upserts it into PostgreSQL
(psycopg 3) or Supabase (supabase-py) with a deterministic id, so a row shipped twice lands
once. `python -m palletizer.telemetry.replica` (scripts/replicate) drains or backfills a run.
"""

from palletizer.telemetry.replica.base import SCHEMA_VERSION, Backend, migrations, sql_dir
from palletizer.telemetry.replica.credentials import Choice, choose_backend, replica_line
from palletizer.telemetry.replica.orphans import adopt_orphans, recover_run
from palletizer.telemetry.replica.outbox import OUTBOX_FILE, Outbox, owner_alive
from palletizer.telemetry.replica.replicator import Replicator
from palletizer.telemetry.replica.rows import (
    ReplicaDown,
    ReplicaError,
    ReplicaFatal,
    ReplicaRefused,
    Row,
)

__all__ = [
    'OUTBOX_FILE',
    'SCHEMA_VERSION',
    'Backend',
    'Choice',
    'Outbox',
    'ReplicaDown',
    'ReplicaError',
    'ReplicaFatal',
    'ReplicaRefused',
    'Replicator',
    'Row',
    'adopt_orphans',
    'choose_backend',
    'migrations',
    'owner_alive',
    'recover_run',
    'replica_line',
    'sql_dir',
]
