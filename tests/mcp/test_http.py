"""The streamable HTTP transport: a bearer token on every request, 127.0.0.1 only unless the
user says otherwise. The server runs as `scripts/mcp` runs it, in a child process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from palletizer.cli.mcp_server import main

TOKEN = 'test-token-5678'
GUARD_S = 60.0  # a server that never listens fails the test instead of blocking the suite


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> list[str]:
    """The local addresses (hex, as /proc/net/tcp* writes them) that listen on `port`."""
    found = []
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        if not Path(table).exists():
            continue
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            addr, _, hexport = local.partition(':')
            if state == '0A' and int(hexport, 16) == port:  # 0A: LISTEN
                found.append(addr)
    return found


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp('mcp-http')
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, '-m', 'palletizer.cli.mcp_server', '--transport', 'http',
         '--port', str(port), '--token', TOKEN, '--runs', str(work / 'runs')],
        cwd=work,
        env={**os.environ, 'PYTHONUNBUFFERED': '1'},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )  # fmt: skip
    try:
        end = time.monotonic() + GUARD_S
        while not _listening(port):
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ''
            assert time.monotonic() < end, 'the server did not listen'
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_request_without_the_token_is_refused(server):
    url = f'http://127.0.0.1:{server}/mcp'
    body = {'jsonrpc': '2.0', 'id': 1, 'method': 'tools/list', 'params': {}}
    headers = {'Accept': 'application/json, text/event-stream'}
    with httpx2.Client() as http:
        bare = http.post(url, json=body, headers=headers)
        wrong = http.post(url, json=body, headers={**headers, 'Authorization': 'Bearer nope'})
    assert bare.status_code == 401 and wrong.status_code == 401
    assert 'bearer token' in bare.text
    assert bare.headers['www-authenticate'] == 'Bearer'


def test_with_the_token_a_client_lists_the_tools(server):
    async def go():
        auth = {'Authorization': f'Bearer {TOKEN}'}
        async with httpx2.AsyncClient(headers=auth) as http:
            transport = streamable_http_client(f'http://127.0.0.1:{server}/mcp', http_client=http)
            async with Client(transport) as client:
                return {t.name for t in (await client.list_tools()).tools}

    assert {'run_episode', 'stop', 'get_cell_state'} <= anyio.run(go)


def test_it_listens_on_loopback_only(server):
    assert _listening(server) == ['0100007F']  # 127.0.0.1, and no other address


def test_another_address_needs_allow_remote(capsys):
    assert main(['--transport', 'http', '--host', '0.0.0.0']) == 2
    assert '--allow-remote' in capsys.readouterr().err
