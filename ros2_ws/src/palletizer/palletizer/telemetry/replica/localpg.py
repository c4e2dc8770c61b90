"""A throwaway PostgreSQL server in a temporary folder: for the tests and `scripts/bench replica`.

Debian's postgresql package (installed by scripts/setup) provides initdb and pg_ctl under
/usr/lib/postgresql/<version>/bin. initdb refuses to run as root, so as root every server
command runs as the `postgres` user (runuser). The server listens on a Unix socket in its own
folder and on 127.0.0.1:<port>; local socket connections are trusted, TCP ones need the
password (so a wrong password can be tested). fsync is off: the data is thrown away.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from palletizer.telemetry.replica.rows import ReplicaError

__all__ = ['LocalPostgres', 'postgres_bin']

PASSWORD = 'palletizer-test'


def postgres_bin() -> Path:
    """The newest /usr/lib/postgresql/<version>/bin with initdb; ReplicaError naming the fix."""
    found = sorted(
        Path('/usr/lib/postgresql').glob('*/bin/initdb'), key=lambda p: int(p.parts[-3])
    )
    if not found:
        raise ReplicaError(
            'PostgreSQL server binaries not found under /usr/lib/postgresql; run scripts/setup '
            '(it installs the Debian package postgresql)'
        )
    return found[-1].parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


class LocalPostgres:
    """initdb + pg_ctl in a temporary folder; start(), stop(), restart, and DSNs to it."""

    def __init__(self, dbname: str = 'palletizer') -> None:
        self.bin = postgres_bin()
        self.dbname = dbname
        self.root = Path(tempfile.mkdtemp(prefix='palletizer-pg-'))
        self.data = self.root / 'data'
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam('postgres')
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as = ['runuser', '-u', 'postgres', '--']
        pw = self.root / 'pw'
        pw.write_text(PASSWORD + '\n')
        if self._as:
            os.chown(pw, pwd.getpwnam('postgres').pw_uid, -1)
        self._run(
            'initdb', '-D', str(self.data), '-U', 'postgres', '--auth-local=trust',
            '--auth-host=scram-sha-256', f'--pwfile={pw}', '--no-sync', '-E', 'UTF8',
        )  # fmt: skip
        self.running = False

    def _run(self, tool: str, *args: str) -> None:
        cmd = [*self._as, str(self.bin / tool), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=self.root, check=False)
        if done.returncode != 0:
            raise ReplicaError(f'{tool} failed ({done.returncode}): {done.stderr.strip()[-400:]}')

    def start(self) -> None:
        opts = (
            f'-k {self.root} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off '
            '-c synchronous_commit=off -c full_page_writes=off'
        )
        self._run('pg_ctl', '-D', str(self.data), '-o', opts, '-l', str(self.root / 'log'),
                  '-w', '-t', '60', 'start')  # fmt: skip
        self.running = True
        if not getattr(self, '_created', False):
            import psycopg

            with psycopg.connect(self.dsn('postgres'), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE {self.dbname}')
            self._created = True

    def stop(self, mode: str = 'fast') -> None:
        """Stop the server (mode fast: close the connections; immediate: as a crash)."""
        if self.running:
            self._run('pg_ctl', '-D', str(self.data), '-m', mode, '-w', '-t', '60', 'stop')
            self.running = False

    def dsn(self, dbname: str | None = None) -> str:
        """Over the Unix socket (works from inside a network namespace too)."""
        return f'host={self.root} port={self.port} dbname={dbname or self.dbname} user=postgres'

    def tcp_dsn(self, password: str = PASSWORD) -> str:
        return (
            f'postgresql://postgres:{password}@127.0.0.1:{self.port}/{self.dbname}'
            '?connect_timeout=3'
        )

    def close(self) -> None:
        try:
            self.stop('immediate')
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
