"""The Supabase replica through supabase-py: PostgREST bulk upserts on `id`, PNGs in Storage.

Rows: consecutive rows of one table and one key set go as one
`POST /rest/v1/<table>?on_conflict=id` with `Prefer: resolution=merge-duplicates,return=minimal`
(PostgREST's INSERT ... ON CONFLICT (id) DO UPDATE of the columns sent), so a partial row such as
an episode's end row keeps the columns it does not carry. Rows with another key set start a new
request: supabase-py sends `columns=` as the union of the batch's keys, and PostgREST would write
NULL into a column a row lacks.

Snapshots: the PNG at run_dir / row.blob is uploaded (x-upsert: true, image/png) to the Storage
bucket (`snapshots` by default, public) as `<episode_id>/<after_seq:03d>-<view>.png`, and the
row is sent with `url` set to the object's public URL and without `png` (that column is for
plain PostgreSQL). The PNGs of a request are uploaded before its rows, so no row points at a
missing object.

Atomicity: each request is one transaction on the server, but a batch of several requests is
not: when a later request fails, the earlier ones have landed. Shipping the batch again is safe
(every row is upserted on its deterministic `id`, every object with x-upsert).

Verification: there is no PostgREST or Storage server on the development machine, so this module
is verified only against the HTTP contract of PostgREST and Supabase Storage, mocked with respx
(tests/telemetry/test_replica_supabase.py): URLs, headers, query parameters, bodies and the
error mapping below. The SQL behind it (upsert on `id`, CHECK constraints) is verified against a
real PostgreSQL 15 through the postgres backend; neither Row-Level Security nor the Supabase
gateway has been exercised here.

Errors: connection failures, timeouts, HTTP 408/429 and 5xx -> ReplicaDown; HTTP 401/403, a JWT
error (PGRST30x), a permission or Row-Level Security refusal (42501), an anon or publishable key,
a missing table or column, a missing bucket, a schema of another version -> ReplicaFatal; other
4xx answers (a Postgres data error such as 23514, 23502, 23503, 22P02; HTTP 400/409/413/422) ->
ReplicaRefused naming the table and the database's message. The key never appears in a message
(anything the server echoes is redacted too).

Not thread-safe: one thread connects and ships (the HTTP status of the last answer is kept on
the backend to classify supabase-py's errors, which do not carry it).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx
from postgrest import APIError
from postgrest.types import ReturnMethod
from storage3.exceptions import StorageApiError
from storage3.types import FileOptions
from supabase import Client, ClientOptions, SupabaseException, create_client

from palletizer.telemetry.replica.base import SCHEMA_VERSION
from palletizer.telemetry.replica.rows import (
    ReplicaDown,
    ReplicaError,
    ReplicaFatal,
    ReplicaRefused,
    Row,
)

__all__ = ['SupabaseBackend']

_T = TypeVar('_T')

_APPLY = f'apply sql/001..{SCHEMA_VERSION:03d} in the SQL editor'
_BAD_KEY = 'bad credentials (SUPABASE_SERVICE_KEY)'
# PostgREST and Postgres codes meaning the tables are not the ones this code writes.
_NO_TABLE = ('PGRST205', '42P01', 'PGRST106')
_NO_COLUMN = ('PGRST204', '42703')
# Key roles that cannot write past Row-Level Security.
_READ_ONLY_ROLES = ('anon', 'authenticated', 'publishable')
# Rows are written without reading them back. ReturnMethod is an enum.StrEnum (Python 3.11+),
# which mypy at python_version 3.10 does not know: it reads the members as str, the lookup by
# value (the same member) keeps the enum type.
_RETURN_MINIMAL = ReturnMethod('minimal')


def _key_role(key: str) -> str | None:
    """The role a Supabase API key claims ('service_role', 'anon', 'secret', ...), if readable.

    New-style keys say it in their prefix (sb_secret_, sb_publishable_); legacy keys are JWTs
    whose unverified payload carries `role`. None for anything else.
    """
    for prefix in ('secret', 'publishable'):
        if key.startswith(f'sb_{prefix}_'):
            return prefix
    parts = key.split('.')
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + '=' * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    role = payload.get('role') if isinstance(payload, dict) else None
    return role if isinstance(role, str) else None


def _int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


class SupabaseBackend:
    """Rows into the Supabase project at `url` (https://<ref>.supabase.co) with the service key.

    timeout_s: the limit, in seconds, on connecting, on each read and each write of one HTTP
    request (PostgREST and Storage alike). bucket: the Storage bucket of snapshot PNGs (public,
    created beforehand).
    """

    name = 'supabase'

    def __init__(
        self, url: str, key: str, *, timeout_s: float = 6.0, bucket: str = 'snapshots'
    ) -> None:
        self.url = url.rstrip('/')
        self._key = key
        self.timeout_s = float(timeout_s)
        self.bucket = bucket
        self._client: Client | None = None
        self._http: httpx.Client | None = None
        self._status = 0  # HTTP status of the last answer, 0 when none came

    def __repr__(self) -> str:
        return f'SupabaseBackend({self.url!r}, bucket={self.bucket!r})'

    def describe(self) -> str:
        """Where rows go, without the key: 'supabase https://<ref>.supabase.co'."""
        return f'supabase {self.url}'

    # -- connect -------------------------------------------------------------------------------

    def connect(self) -> None:
        """Create the client and check that the database's schema is version SCHEMA_VERSION.

        One GET of schema_migrations (highest version); safe to call again once connected.
        """
        if self._client is not None:
            return
        where = self.describe()
        if not self.url.startswith(('https://', 'http://')):
            raise ReplicaFatal(f'{where}: not an http(s) URL (SUPABASE_URL)')
        if not self._key:
            raise ReplicaFatal(f'{where}: no key ({_BAD_KEY} is empty)')
        role = _key_role(self._key)
        if role in _READ_ONLY_ROLES:
            raise ReplicaFatal(
                f'{where}: {_BAD_KEY}: that is the {role} key, which Row-Level Security keeps '
                'from writing; use the service_role (secret) key'
            )
        http = httpx.Client(
            timeout=httpx.Timeout(self.timeout_s),
            follow_redirects=True,
            event_hooks={'response': [self._seen]},
        )
        # With an httpx client given, supabase-py uses it for PostgREST, Storage and Auth, so
        # the timeout above is theirs (ClientOptions' own timeouts are whole seconds). Retries
        # are off: the outbox retries with back-off, and a retry here would sleep 1 + 2 + 4 s.
        options = ClientOptions(
            httpx_client=http,
            postgrest_client_retry=False,
            auto_refresh_token=False,
            persist_session=False,
        )
        try:
            client = create_client(self.url, self._key, options)
        except SupabaseException as exc:
            http.close()
            raise ReplicaFatal(f'{where}: {self._redact(exc.message)}') from None
        self._client, self._http = client, http
        try:
            self._check_schema(client)
        except BaseException:
            self.close()
            raise

    def _check_schema(self, client: Client) -> None:
        where = self.describe()
        query = client.table('schema_migrations').select('version').order('version', desc=True)
        got = self._call('schema_migrations', query.limit(1).execute, connecting=True)
        data = got.data
        if not isinstance(data, list):
            raise ReplicaFatal(
                f'{where}: schema_migrations answered {str(data)[:80]!r}, not rows '
                '(is this the project URL?)'
            )
        if not data:
            raise ReplicaFatal(f'{where}: schema_migrations is empty; {_APPLY}')
        row = data[0]
        version = row.get('version') if isinstance(row, Mapping) else None
        if not isinstance(version, int) or isinstance(version, bool):
            raise ReplicaFatal(f'{where}: schema_migrations.version = {version!r}; {_APPLY}')
        if version < SCHEMA_VERSION:
            raise ReplicaFatal(
                f'{where}: schema version {version}; this code needs {SCHEMA_VERSION} ({_APPLY})'
            )
        if version > SCHEMA_VERSION:
            raise ReplicaFatal(
                f'{where}: schema version {version}; this code needs {SCHEMA_VERSION} '
                '(refusing to write to a newer schema: update this code)'
            )

    # -- ship ----------------------------------------------------------------------------------

    def ship(self, rows: Sequence[Row], run_dir: Path) -> None:
        """Upsert `rows` on `id`, in order, one request per run of one table and one key set.

        A snapshot row's PNG is read from run_dir / row.blob and uploaded first. Connects when
        not connected. Raises ReplicaDown, ReplicaFatal or ReplicaRefused (see the module).
        """
        if not rows:
            return
        if self._client is None:
            self.connect()
        client = self._client
        assert client is not None
        for table, group in _groups(rows):
            payload = [self._prepare(client, row, Path(run_dir)) for row in group]
            if group[0].op == 'update':  # one PATCH per row: /table?id=eq.<id>
                for data in payload:
                    fields = {k: v for k, v in data.items() if k != 'id'}
                    request = (
                        client.table(table)
                        .update(fields, returning=_RETURN_MINIMAL)
                        .eq('id', data['id'])
                    )
                    self._call(table, request.execute)
                continue
            request = client.table(table).upsert(
                payload, on_conflict='id', returning=_RETURN_MINIMAL
            )
            self._call(table, request.execute)

    def _prepare(self, client: Client, row: Row, run_dir: Path) -> dict[str, Any]:
        """The JSON object of one row; for a snapshot, upload its PNG and point `url` at it."""
        data = dict(row.data)
        if row.table != 'snapshots':
            return data
        data.pop('png', None)
        if not row.blob:
            return data
        where = self.describe()
        try:
            path = f'{data["episode_id"]}/{int(data["after_seq"]):03d}-{data["view"]}.png'
        except (KeyError, TypeError, ValueError) as exc:
            raise ReplicaRefused(
                f'{where}: snapshots: row {data.get("id")} lacks a usable {exc} '
                '(needs episode_id, after_seq, view)'
            ) from None
        try:
            png = (run_dir / row.blob).read_bytes()
        except OSError as exc:
            raise ReplicaRefused(f'{where}: snapshots: PNG unreadable ({exc})') from None
        bucket = client.storage.from_(self.bucket)
        options: FileOptions = {'content-type': 'image/png', 'upsert': 'true'}
        self._call('snapshots', lambda: bucket.upload(path, png, options), storage=True)
        data['url'] = bucket.get_public_url(path)
        return data

    # -- errors --------------------------------------------------------------------------------

    def _seen(self, response: httpx.Response) -> None:
        self._status = response.status_code

    def _redact(self, text: str) -> str:
        return text.replace(self._key, '***') if self._key else text

    def _call(
        self,
        table: str,
        fn: Callable[[], _T],
        *,
        connecting: bool = False,
        storage: bool = False,
    ) -> _T:
        """fn() with its errors as ReplicaDown / ReplicaFatal / ReplicaRefused."""
        self._status = 0
        try:
            return fn()
        except httpx.UnsupportedProtocol as exc:
            raise ReplicaFatal(self._message(table, f'bad URL ({exc})')) from None
        except httpx.RequestError as exc:
            why = str(exc).strip() or type(exc).__name__
            raise ReplicaDown(self._message(table, f'unreachable ({why})')) from None
        except APIError as exc:
            raise self._api_error(table, exc, connecting) from None
        except StorageApiError as exc:
            raise self._storage_error(exc) from None
        except (ValueError, TypeError) as exc:
            # supabase-py's own checks (an object key with dot segments, a body it cannot
            # encode as JSON): this row cannot go as it is.
            what = 'Storage object' if storage else 'request'
            raise ReplicaRefused(self._message(table, f'bad {what} ({exc})')) from None

    def _message(self, table: str, why: str) -> str:
        return self._redact(f'{self.describe()}: {table}: {why}')

    def _api_error(self, table: str, exc: APIError, connecting: bool) -> ReplicaError:
        status = self._status
        code = str(exc.code or '')
        said = ' '.join(str(exc.message or '').split()) or f'HTTP {status}'
        said = f'{said} [{code}]' if code and code != str(status) else said
        if status in (401, 403) or code.startswith('PGRST30') or code == '42501':
            return ReplicaFatal(self._message(table, f'{_BAD_KEY}: {said}'))
        if status in (408, 429) or status >= 500:
            return ReplicaDown(self._message(table, f'server answered HTTP {status}: {said}'))
        if status == 404 or code in _NO_TABLE:
            return ReplicaFatal(self._message(table, f'schema not applied ({said}); {_APPLY}'))
        if code in _NO_COLUMN:
            return ReplicaFatal(self._message(table, f'schema differs ({said}); {_APPLY}'))
        if connecting:
            return ReplicaFatal(self._message(table, f'unexpected answer ({said})'))
        return ReplicaRefused(self._message(table, f'refused by the database: {said}'))

    def _storage_error(self, exc: StorageApiError) -> ReplicaError:
        # Supabase Storage often answers HTTP 400 with the real status in its body's statusCode.
        status = _int(exc.status) or self._status
        said = f'{" ".join(str(exc.message).split())} [{exc.code}, {status}]'
        where = f'Storage bucket {self.bucket!r}'
        if status in (401, 403):
            return ReplicaFatal(self._message('snapshots', f'{_BAD_KEY}: {where}: {said}'))
        if status in (408, 429) or status >= 500:
            return ReplicaDown(self._message('snapshots', f'{where}: {said}'))
        if status == 404:
            return ReplicaFatal(
                self._message('snapshots', f'{where} not found ({said}); create it, public')
            )
        return ReplicaRefused(self._message('snapshots', f'{where} refused the PNG: {said}'))

    # -- close ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Drop the client and its HTTP connections; safe to call more than once."""
        http, self._http, self._client = self._http, None, None
        if http is not None:
            http.close()


def _groups(rows: Sequence[Row]) -> list[tuple[str, list[Row]]]:
    """Consecutive rows of one table and one key set (a snapshot's `png` key aside)."""
    out: list[tuple[str, list[Row]]] = []
    last: tuple[str, str, frozenset[str]] | None = None
    for row in rows:
        keys = frozenset(row.data)
        if row.table == 'snapshots':
            keys = (keys | {'url'}) - {'png'}
        if last == (row.table, row.op, keys):
            out[-1][1].append(row)
        else:
            out.append((row.table, [row]))
            last = (row.table, row.op, keys)
    return out
