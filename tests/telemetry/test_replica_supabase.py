"""SupabaseBackend against a respx mock of PostgREST and Supabase Storage (no real host).

Pins the HTTP contract supabase-py 2.34 speaks for it: the upsert request (URL, on_conflict,
headers, Prefer, body), grouping into bulk requests, the snapshot upload and its public URL, the
schema check on connect, and the mapping of answers to ReplicaDown / ReplicaFatal /
ReplicaRefused, with the key kept out of every message.

Why one file of this length: one HTTP contract, one mock transport shared by every case.
"""

from __future__ import annotations

import base64
import json
import traceback
import uuid
from collections.abc import Callable, Iterator
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from palletizer.telemetry.replica.base import SCHEMA_VERSION
from palletizer.telemetry.replica.rows import (
    ReplicaDown,
    ReplicaError,
    ReplicaFatal,
    ReplicaRefused,
    Row,
    episode_begin_row,
    episode_end_row,
    row_from_disk,
    run_row,
)
from palletizer.telemetry.replica.supabase import SupabaseBackend

URL = 'https://example.supabase.co'
KEY = 'sb_secret_T3stKey-9f2c4a7e1b55d0'
RUN = '6f1c2d3e-4b5a-4c6d-8e7f-901a2b3c4d5e'
PNG = b'\x89PNG\r\n\x1a\n' + bytes(range(256)) * 3
SCHEMA = '/rest/v1/schema_migrations'
CHECK_VIOLATION = {
    'code': '23514',
    'details': None,
    'hint': None,
    'message': 'new row for relation "events" violates check constraint "events_kind_check"',
}


@pytest.fixture
def api() -> Iterator[respx.MockRouter]:
    """The mocked project; every request not routed fails the test (no real host is reached)."""
    with respx.mock(base_url=URL, assert_all_called=False, assert_all_mocked=True) as mock:
        mock.get(SCHEMA).respond(200, json=[{'version': SCHEMA_VERSION}])
        yield mock


@pytest.fixture
def backend() -> Iterator[SupabaseBackend]:
    b = SupabaseBackend(URL, KEY, timeout_s=2.0)
    yield b
    b.close()


def _posts(api: respx.MockRouter, path_prefix: str = '/rest/v1/') -> list[httpx.Request]:
    return [
        c.request
        for c in api.calls
        if c.request.method == 'POST' and c.request.url.path.startswith(path_prefix)
    ]


def _events(n: int, seed: int = 1) -> list[Row]:
    return [
        row_from_disk(
            RUN,
            'events',
            {'seed': seed, 'seq': i, 'kind': 'pick', 't_sim': 0.5 * i, 'payload': {'k': i}},
        )
        for i in range(n)
    ]


def _snapshot(after_seq: int = 7, view: str = 'top', seed: int = 3) -> Row:
    return row_from_disk(
        RUN,
        'snapshots',
        {
            'seed': seed,
            'after_seq': after_seq,
            'view': view,
            'path': f'{seed}/{after_seq:03d}-{view}.png',
            'width': 64,
            'height': 48,
        },
    )


def _jwt(role: str) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b'=').decode()

    return f'{part({"alg": "HS256"})}.{part({"iss": "supabase", "role": role})}.c2ln'


# -- the upsert request ------------------------------------------------------------------------


def test_upsert_request_shape(api: respx.MockRouter, backend: SupabaseBackend) -> None:
    route = api.post('/rest/v1/events').respond(201)
    rows = _events(3)
    backend.connect()
    backend.ship(rows, Path('/nonexistent'))

    assert route.call_count == 1
    req = route.calls.last.request
    assert req.url.host == 'example.supabase.co'
    assert req.url.path == '/rest/v1/events'
    assert req.url.params['on_conflict'] == 'id'
    assert req.headers['apikey'] == KEY
    assert req.headers['authorization'] == f'Bearer {KEY}'
    prefer = [p.strip() for p in req.headers['prefer'].split(',')]
    assert 'resolution=merge-duplicates' in prefer
    assert 'return=minimal' in prefer
    assert req.headers['content-type'].startswith('application/json')
    assert json.loads(req.content) == [dict(r.data) for r in rows]
    # columns= lists the union of the keys in a varying order: compare it as a set.
    columns = {c.strip('"') for c in req.url.params['columns'].split(',')}
    assert columns == set(rows[0].data)


def test_schema_check_query(api: respx.MockRouter, backend: SupabaseBackend) -> None:
    backend.connect()
    backend.connect()  # connected: no second check
    assert api.calls.call_count == 1
    req = api.calls.last.request
    assert req.method == 'GET'
    assert req.url.path == SCHEMA
    assert req.url.params['select'] == 'version'
    assert req.url.params['order'] == 'version.desc'
    assert req.url.params['limit'] == '1'
    assert req.headers['apikey'] == KEY


def test_ship_connects_when_needed_and_empty_ship_sends_nothing(
    api: respx.MockRouter, backend: SupabaseBackend
) -> None:
    backend.ship([], Path('.'))
    assert api.calls.call_count == 0
    route = api.post('/rest/v1/runs').respond(201)
    backend.ship([run_row(RUN, {'task': 'table', 'level': 11})], Path('.'))
    assert [c.request.url.path for c in api.calls] == [SCHEMA, '/rest/v1/runs']
    assert route.call_count == 1


# -- grouping ----------------------------------------------------------------------------------


def test_two_tables_go_as_two_requests_in_order(
    api: respx.MockRouter, backend: SupabaseBackend
) -> None:
    api.post('/rest/v1/runs').respond(201)
    api.post('/rest/v1/events').respond(201)
    run = run_row(RUN, {'task': 'table', 'level': 11, 'started_at': '2026-05-09T07:35:25Z'})
    events = _events(2)
    backend.ship([run, *events], Path('.'))

    posts = _posts(api)
    assert [p.url.path for p in posts] == ['/rest/v1/runs', '/rest/v1/events']
    assert json.loads(posts[0].content) == [dict(run.data)]
    assert json.loads(posts[1].content) == [dict(r.data) for r in events]


def test_rows_with_other_keys_or_not_consecutive_go_apart(
    api: respx.MockRouter, backend: SupabaseBackend
) -> None:
    for table in ('episodes', 'events', 'runs'):
        api.post(f'/rest/v1/{table}').respond(201)
    info = {'task': 'table', 'level': 11, 'n_objects': 4}
    begin_1 = episode_begin_row(RUN, 1, info, '2026-05-09T07:35:25Z')
    begin_2 = episode_begin_row(RUN, 2, info, '2026-05-09T07:36:25Z')
    end_1 = episode_end_row(
        RUN,
        {'seed': 1, 'success': True, 'duration_s': 12.5, 'n_placed': 4, **info},
        'x',
    )
    ev_a, ev_b = _events(1, seed=1), _events(1, seed=2)
    run = run_row(RUN, {'task': 'table', 'level': 11})
    rows = [begin_1, begin_2, end_1, *ev_a, run, *ev_b]
    backend.ship(rows, Path('.'))

    posts = _posts(api)
    assert [p.url.path.rsplit('/', 1)[1] for p in posts] == [
        'episodes',
        'episodes',
        'events',
        'runs',
        'events',
    ]
    bodies = [json.loads(p.content) for p in posts]
    assert bodies[0] == [dict(begin_1.data), dict(begin_2.data)]
    assert bodies[1] == [dict(end_1.data)]  # the end row alone: started_at is not touched
    assert 'started_at' not in bodies[1][0]
    assert bodies[2] == [dict(ev_a[0].data)]
    assert bodies[4] == [dict(ev_b[0].data)]


def test_an_amendment_row_is_a_patch_of_that_id(
    api: respx.MockRouter, backend: SupabaseBackend
) -> None:
    # runs.ended_at at close and an orphan's aborted close carry no task/level: they are
    # updates (an upsert would be refused: NOT NULL is checked before ON CONFLICT).
    route = api.patch('/rest/v1/runs').respond(204)
    closing = run_row(RUN, {}, ended_at='2026-05-09T08:00:00Z')
    assert closing.op == 'update'
    backend.ship([closing], Path('.'))
    (call,) = route.calls
    assert call.request.url.params['id'] == f'eq.{RUN}'
    assert json.loads(call.request.content) == {'ended_at': '2026-05-09T08:00:00Z'}
    assert 'return=minimal' in call.request.headers['prefer']


# -- snapshots ---------------------------------------------------------------------------------


def _multipart_file(req: httpx.Request) -> tuple[bytes, str]:
    """(bytes, content type) of the `file` part of a multipart/form-data request."""
    head = f'Content-Type: {req.headers["content-type"]}\r\n\r\n'.encode()
    msg = BytesParser(policy=HTTP).parsebytes(head + req.content)
    for part in msg.iter_parts():
        if part.get_param('name', header='content-disposition') == 'file':
            return part.get_payload(decode=True), part.get_content_type()
    raise AssertionError('no file part in the upload')


def test_snapshot_png_goes_to_storage_and_row_gets_public_url(
    api: respx.MockRouter, backend: SupabaseBackend, tmp_path: Path
) -> None:
    snap = _snapshot(after_seq=7, view='top', seed=3)
    (tmp_path / '3').mkdir()
    (tmp_path / snap.blob).write_bytes(PNG)
    episode = snap.data['episode_id']
    object_path = f'/storage/v1/object/snapshots/{episode}/007-top.png'
    upload = api.post(object_path).respond(200, json={'Key': f'snapshots/{episode}/007-top.png'})
    rows_route = api.post('/rest/v1/snapshots').respond(201)
    backend.ship([snap], tmp_path)

    assert upload.call_count == 1 and rows_route.call_count == 1
    up = upload.calls.last.request
    assert up.headers['x-upsert'] == 'true'
    assert up.headers['apikey'] == KEY
    assert up.headers['authorization'] == f'Bearer {KEY}'
    body, content_type = _multipart_file(up)
    assert body == PNG
    assert content_type == 'image/png'
    # The object is stored before the row that points at it.
    paths = [c.request.url.path for c in api.calls]
    assert paths.index(object_path) < paths.index('/rest/v1/snapshots')

    sent = json.loads(rows_route.calls.last.request.content)
    public = f'{URL}/storage/v1/object/public/snapshots/{episode}/007-top.png'
    assert sent == [{**snap.data, 'url': public}]
    assert 'png' not in sent[0]


def test_snapshot_png_key_is_dropped_and_several_snapshots_share_one_request(
    api: respx.MockRouter, backend: SupabaseBackend, tmp_path: Path
) -> None:
    snaps = [_snapshot(after_seq=5, view='top'), _snapshot(after_seq=5, view='iso')]
    snaps[0] = Row('snapshots', {**snaps[0].data, 'png': '\\x00'}, snaps[0].blob)
    (tmp_path / '3').mkdir()
    for s in snaps:
        (tmp_path / s.blob).write_bytes(PNG)
    upload = api.post(path__startswith='/storage/v1/object/snapshots/').respond(
        200, json={'Key': 'k'}
    )
    rows_route = api.post('/rest/v1/snapshots').respond(201)
    backend.ship(snaps, tmp_path)

    assert [c.request.url.path.rsplit('/', 1)[1] for c in upload.calls] == [
        '005-top.png',
        '005-iso.png',
    ]
    assert rows_route.call_count == 1
    sent = json.loads(rows_route.calls.last.request.content)
    assert [s['url'].rsplit('/', 1)[1] for s in sent] == ['005-top.png', '005-iso.png']
    assert all('png' not in s for s in sent)


def test_missing_png_is_refused_before_any_request(
    api: respx.MockRouter, backend: SupabaseBackend, tmp_path: Path
) -> None:
    backend.connect()
    with pytest.raises(ReplicaRefused, match='snapshots: PNG unreadable'):
        backend.ship([_snapshot()], tmp_path)
    assert api.calls.call_count == 1  # the schema check only


# -- schema check ------------------------------------------------------------------------------


def test_schema_version_2_connects(api: respx.MockRouter, backend: SupabaseBackend) -> None:
    assert SCHEMA_VERSION == 2
    backend.connect()  # no exception
    assert backend.describe() == f'supabase {URL}'


@pytest.mark.parametrize(
    ('version', 'hint'), [(1, 'apply sql/001..002 in the SQL editor'), (3, 'newer schema')]
)
def test_other_schema_version_is_fatal(
    api: respx.MockRouter, backend: SupabaseBackend, version: int, hint: str
) -> None:
    api.get(SCHEMA).respond(200, json=[{'version': version}])
    with pytest.raises(ReplicaFatal) as err:
        backend.connect()
    text = str(err.value)
    assert f'schema version {version}; this code needs 2' in text
    assert hint in text
    assert text.startswith(f'supabase {URL}: ')
    assert '\n' not in text


def test_missing_migrations_table_is_fatal(
    api: respx.MockRouter, backend: SupabaseBackend
) -> None:
    api.get(SCHEMA).respond(
        404,
        json={
            'code': 'PGRST205',
            'details': None,
            'hint': "Perhaps you meant the table 'public.snapshots'",
            'message': "Could not find the table 'public.schema_migrations' in the schema cache",
        },
    )
    with pytest.raises(ReplicaFatal, match='schema not applied') as err:
        backend.connect()
    assert 'apply sql/001..002' in str(err.value)


def test_empty_migrations_table_is_fatal(api: respx.MockRouter, backend: SupabaseBackend) -> None:
    api.get(SCHEMA).respond(200, json=[])
    with pytest.raises(ReplicaFatal, match='schema_migrations is empty'):
        backend.connect()


# -- error mapping -----------------------------------------------------------------------------


def test_http_401_on_connect_is_fatal_bad_credentials(
    api: respx.MockRouter, backend: SupabaseBackend
) -> None:
    # The Supabase gateway's answer carries no PostgREST code: only the status tells.
    api.get(SCHEMA).respond(
        401, json={'message': 'Invalid API key', 'hint': 'Double check your Supabase key.'}
    )
    with pytest.raises(ReplicaFatal, match=r'bad credentials \(SUPABASE_SERVICE_KEY\)'):
        backend.connect()


def test_jwt_error_on_ship_is_fatal(api: respx.MockRouter, backend: SupabaseBackend) -> None:
    api.post('/rest/v1/events').respond(
        401, json={'code': 'PGRST301', 'message': 'JWSError JWSInvalidSignature'}
    )
    with pytest.raises(ReplicaFatal, match='bad credentials'):
        backend.ship(_events(1), Path('.'))


def test_anon_key_is_fatal_without_a_request(api: respx.MockRouter) -> None:
    b = SupabaseBackend(URL, _jwt('anon'))
    with pytest.raises(ReplicaFatal, match='anon key'):
        b.connect()
    assert api.calls.call_count == 0
    SupabaseBackend(URL, _jwt('service_role')).connect()  # accepted
    assert api.calls.call_count == 1


def test_http_500_on_ship_is_down(api: respx.MockRouter, backend: SupabaseBackend) -> None:
    api.post('/rest/v1/events').respond(500, text='<html>upstream error</html>')
    with pytest.raises(ReplicaDown, match='HTTP 500'):
        backend.ship(_events(2), Path('.'))


def test_http_503_on_connect_is_down_without_retries(
    api: respx.MockRouter, backend: SupabaseBackend
) -> None:
    route = api.get(SCHEMA).respond(503, json={'message': 'Service Unavailable'})
    with pytest.raises(ReplicaDown):
        backend.connect()
    assert route.call_count == 1  # supabase-py's own retry (with sleeps) is off


@pytest.mark.parametrize(
    'error', [httpx.ConnectError('[Errno 111] Connection refused'), httpx.ReadTimeout('timed out')]
)
def test_connection_errors_are_down(
    api: respx.MockRouter, backend: SupabaseBackend, error: Exception
) -> None:
    backend.connect()
    api.post('/rest/v1/events').mock(side_effect=error)
    with pytest.raises(ReplicaDown, match='unreachable'):
        backend.ship(_events(1), Path('.'))
    api.get(SCHEMA).mock(side_effect=error)
    backend.close()
    with pytest.raises(ReplicaDown):
        backend.connect()


def test_check_violation_is_refused_naming_table_and_message(
    api: respx.MockRouter, backend: SupabaseBackend
) -> None:
    api.post('/rest/v1/events').respond(400, json=CHECK_VIOLATION)
    with pytest.raises(ReplicaRefused) as err:
        backend.ship(_events(1), Path('.'))
    text = str(err.value)
    assert ': events: ' in text
    assert 'violates check constraint "events_kind_check"' in text
    assert '23514' in text


def test_storage_errors(api: respx.MockRouter, backend: SupabaseBackend, tmp_path: Path) -> None:
    snap = _snapshot()
    (tmp_path / '3').mkdir()
    (tmp_path / snap.blob).write_bytes(PNG)
    upload = api.post(path__startswith='/storage/v1/object/snapshots/')
    rows_route = api.post('/rest/v1/snapshots').respond(201)
    # Storage answers HTTP 400 and puts the real status in its body.
    for status, body, expected in [
        (400, {'statusCode': '403', 'error': 'Unauthorized', 'message': 'RLS'}, ReplicaFatal),
        (400, {'statusCode': '404', 'error': 'Bucket not found', 'message': 'no'}, ReplicaFatal),
        (400, {'statusCode': '413', 'error': 'Too large', 'message': 'big'}, ReplicaRefused),
        (502, {'message': 'Bad gateway'}, ReplicaDown),
    ]:
        upload.respond(status, json=body)
        with pytest.raises(expected):
            backend.ship([snap], tmp_path)
    assert rows_route.call_count == 0  # no row without its object


# -- the key stays secret ----------------------------------------------------------------------


def _failures(tmp_path: Path) -> list[tuple[Callable[[respx.MockRouter], None], bool]]:
    """(set up the mock, fails on connect) for every kind of failure."""
    echo = {'code': '23514', 'message': f'bad row; apikey was {KEY}', 'details': KEY}
    return [
        (lambda m: m.get(SCHEMA).respond(200, json=[{'version': 1}]), True),
        (lambda m: m.get(SCHEMA).respond(404, json={'code': 'PGRST205', 'message': KEY}), True),
        (lambda m: m.get(SCHEMA).respond(401, json={'message': f'Invalid API key {KEY}'}), True),
        (lambda m: m.get(SCHEMA).mock(side_effect=httpx.ConnectError(KEY)), True),
        (lambda m: m.post('/rest/v1/events').respond(400, json=echo), False),
        (lambda m: m.post('/rest/v1/events').respond(500, text=KEY), False),
        (lambda m: m.post('/rest/v1/events').respond(403, json={'message': KEY}), False),
    ]


def test_key_never_in_an_exception(tmp_path: Path) -> None:
    seen = []
    for setup, on_connect in _failures(tmp_path):
        with respx.mock(base_url=URL, assert_all_called=False) as mock:
            mock.get(SCHEMA).respond(200, json=[{'version': 2}])
            setup(mock)
            b = SupabaseBackend(URL, KEY)
            with pytest.raises(ReplicaError) as err:
                b.connect() if on_connect else b.ship(_events(1), tmp_path)
            seen.append(err.value)
            assert KEY not in str(err.value), str(err.value)
            assert KEY not in repr(err.value)
            shown = ''.join(traceback.format_exception(err.value))  # chained ones too
            assert KEY not in shown
            assert KEY not in repr(b) and KEY not in b.describe()
            b.close()
    assert len(seen) == 7
    assert sum('***' in str(e) for e in seen) >= 4  # the echoed key was redacted, not dropped


def test_close_is_safe_twice_and_ship_reconnects(
    api: respx.MockRouter, backend: SupabaseBackend
) -> None:
    backend.close()
    backend.connect()
    backend.close()
    backend.close()
    api.post('/rest/v1/events').respond(201)
    backend.ship(_events(1), Path('.'))
    assert [c.request.method for c in api.calls] == ['GET', 'GET', 'POST']


def test_ids_are_uuids_and_upsert_is_replayable(
    api: respx.MockRouter, backend: SupabaseBackend
) -> None:
    route = api.post('/rest/v1/events').respond(201)
    rows = _events(2)
    backend.ship(rows, Path('.'))
    backend.ship(rows, Path('.'))  # same ids again: the server merges them (on_conflict=id)
    first, second = (json.loads(c.request.content) for c in route.calls)
    assert first == second
    assert all(uuid.UUID(r['id']) for r in first)


def test_timeout_reaches_postgrest_and_storage(api: respx.MockRouter) -> None:
    b = SupabaseBackend(URL, KEY, timeout_s=2.5)
    b.connect()
    client = b._client
    assert client is not None
    for session in (client.postgrest.session, client.storage.session):
        t = session.timeout
        assert (t.connect, t.read, t.write, t.pool) == (2.5, 2.5, 2.5, 2.5)
    b.close()
    assert b._client is None
