"""What a replica backend is: connect (and check the schema), ship rows in order, close."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from palletizer.core.config import config_dir
from palletizer.telemetry.replica.rows import ReplicaFatal, Row

__all__ = ['Backend', 'Migration', 'SCHEMA_VERSION', 'migrations', 'sql_dir']

# The newest migration in sql/: a database at another version is refused.
SCHEMA_VERSION = 2
_MIGRATION_RE = re.compile(r'^(\d{3})_[a-z0-9_]+\.sql$')


class Backend(Protocol):
    """A replica database.

    connect(): open the connection and check (PostgreSQL: apply) the schema migrations; raises
    ReplicaDown when the server cannot be reached now, ReplicaFatal when retrying cannot help
    (bad DSN or credentials, a schema of another version).
    ship(rows, run_dir): upsert the rows on `id`, in order, all or nothing; a snapshot row's
    PNG is read from run_dir / row.blob. Raises ReplicaDown (nothing landed, retry later) or
    ReplicaRefused (a row the database refuses for good; nothing of the batch landed).
    close(): drop the connection; safe to call more than once.
    """

    name: str

    def describe(self) -> str: ...  # where rows go, without secrets (for the startup line)

    def connect(self) -> None: ...

    def ship(self, rows: Sequence[Row], run_dir: Path) -> None: ...

    def close(self) -> None: ...


class Migration(tuple):
    """(version, path) of one sql/NNN_name.sql file."""

    @property
    def version(self) -> int:
        return int(self[0])

    @property
    def path(self) -> Path:
        return Path(self[1])


def sql_dir() -> Path:
    """The sql/ folder of migrations, beside configs/ (repository or installed share)."""
    return config_dir().parent / 'sql'


def migrations(folder: Path | None = None) -> list[Migration]:
    """The ordered migrations; ReplicaFatal when they are not 001..SCHEMA_VERSION."""
    folder = folder or sql_dir()
    found = []
    for path in sorted(folder.glob('*.sql')):
        m = _MIGRATION_RE.match(path.name)
        if m:
            found.append(Migration((int(m.group(1)), path)))
    versions = [m.version for m in found]
    if versions != list(range(1, SCHEMA_VERSION + 1)):
        raise ReplicaFatal(
            f'{folder}: migrations {versions}; expected 001..{SCHEMA_VERSION:03d} in order'
        )
    return found
