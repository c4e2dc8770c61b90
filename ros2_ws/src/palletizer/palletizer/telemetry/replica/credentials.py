"""Which replica a run gets: the mode, and credentials from the environment or a .env file.

PostgreSQL: PALLETIZER_PG_DSN, else configs/telemetry.yaml replica.postgres.dsn. Supabase:
SUPABASE_URL and SUPABASE_SERVICE_KEY. The environment wins over .env; the .env files read are
the working folder's, the repository's and its parent's (the first that has the key). No
credentials means a disk-only run, said in the startup line; the run goes on. A secret never
appears in a line this module makes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from palletizer.core.config import ReplicaSettings, config_dir
from palletizer.core.errors import InvalidValue
from palletizer.telemetry.replica.base import Backend

__all__ = ['DSN_ENV', 'Choice', 'choose_backend', 'read_env_file', 'replica_line']

DSN_ENV = 'PALLETIZER_PG_DSN'
URL_ENV, KEY_ENV = 'SUPABASE_URL', 'SUPABASE_SERVICE_KEY'


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=value lines of a .env file (quotes stripped, # comments and `export ` allowed)."""
    out: dict[str, str] = {}
    try:
        text = path.read_text()
    except OSError:
        return out
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith('#') or '=' not in line:
            continue
        key, _, value = line.removeprefix('export ').partition('=')
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in '\'"':
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _env_files() -> list[Path]:
    repo = config_dir().parent
    seen: list[Path] = []
    for folder in (Path.cwd(), repo, repo.parent):
        path = (folder / '.env').absolute()
        if path not in seen:
            seen.append(path)
    return seen


def lookup(key: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of `key`: the environment, else the first .env file that has it, else ''."""
    env = os.environ if environ is None else environ
    if env.get(key):
        return env[key]
    for path in _env_files():
        value = read_env_file(path).get(key)
        if value:
            return value
    return ''


@dataclass(frozen=True)
class Choice:
    """The backend a run replicates to (None: disk only) and the startup line that says so."""

    backend: Backend | None
    line: str


def choose_backend(
    mode: str, replica_cfg: ReplicaSettings, environ: Mapping[str, str] | None = None
) -> Choice:
    """The replica for telemetry mode `mode` (disk | postgres | supabase | off), configured by
    configs/telemetry.yaml `replica` (Config.telemetry.replica)."""
    timeout = replica_cfg.timeout_s
    if mode == 'off':
        return Choice(None, 'telemetry off · nothing is written')
    if mode == 'disk':
        return Choice(None, 'disk only')
    if mode == 'postgres':
        dsn = lookup(DSN_ENV, environ) or replica_cfg.postgres.dsn
        if not dsn:
            return Choice(
                None, f'disk only · no credentials ({DSN_ENV} unset; replica postgres is off)'
            )
        from palletizer.telemetry.replica.postgres import PostgresBackend

        backend: Backend = PostgresBackend(dsn, timeout_s=timeout)
    elif mode == 'supabase':
        url, key = lookup(URL_ENV, environ), lookup(KEY_ENV, environ)
        if not url or not key:
            unset = ' and '.join(k for k, v in ((URL_ENV, url), (KEY_ENV, key)) if not v)
            return Choice(
                None, f'disk only · no credentials ({unset} unset; replica supabase is off)'
            )
        from palletizer.telemetry.replica.supabase import SupabaseBackend

        backend = SupabaseBackend(url, key, timeout_s=timeout, bucket=replica_cfg.supabase.bucket)
    else:
        raise InvalidValue(f'telemetry mode = {mode!r}; expected disk, postgres, supabase or off')
    return Choice(backend, f'replica {backend.describe()} · disk first, through the run outbox')


def replica_line(mode: str) -> str:
    """The startup line for telemetry mode `mode` with this machine's credentials."""
    from palletizer.core.config import load_config

    return choose_backend(mode, load_config().telemetry.replica).line
