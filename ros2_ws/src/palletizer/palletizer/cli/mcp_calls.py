"""How the MCP server guards and records its calls: the bearer token on HTTP, the project's
errors turned into tool errors, and the call log.

Every tool call is appended to `<runs_dir>/mcp-calls.jsonl` (CALL_LOG), one JSON line per call:
time, tool, arguments, outcome (ok, refused or error) and a short result or the error, so an
assistant's session can be audited afterwards. The file is only ever appended to; the same line
goes to stderr.
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from palletizer.cli.mcp_preview import jsonl_rows
from palletizer.core.errors import PalletizerError

__all__ = ['CALL_LOG', 'CallLog', 'Record', 'ToolRefused', 'bearer_app', 'logged']

CALL_LOG = 'mcp-calls.jsonl'  # in the runs folder; list_runs skips files
TEXT_MAX = 300  # characters of a result or an error kept in the call log

Outcome = Literal['ok', 'refused', 'error']
_log = logging.getLogger('palletizer.mcp')


class CallLog:
    """Appends one JSON line per tool call to `path`; a failed write is logged, never raised
    (the call's own answer matters more than its record)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(
        self, tool: str, args: dict[str, Any], outcome: Outcome, text: str, **extra: Any
    ) -> None:
        line = {
            'time': datetime.now(timezone.utc).isoformat(timespec='milliseconds'),
            'tool': tool,
            'arguments': args,
            'outcome': outcome,
            'result' if outcome == 'ok' else 'error': _short(text),
            **extra,
        }
        data = json.dumps(line, default=str, ensure_ascii=False) + '\n'
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open('a', encoding='utf-8') as f:
                    f.write(data)
            except OSError as exc:
                _log.warning('call log %s not written: %s', self.path, exc)

    def lines(self) -> list[dict[str, Any]]:
        return jsonl_rows(self.path)


def _short(text: str) -> str:
    text = ' '.join(text.split())
    return text if len(text) <= TEXT_MAX else text[: TEXT_MAX - 3] + '...'


class ToolRefused(PalletizerError, ToolError):
    """A tool call the server refuses; the assistant reads its message (what was wrong and what
    is allowed) as the tool's error result."""


class Record:
    """What a logged call returned (set by the tool's body), for its line in the call log."""

    def __init__(self, done: str) -> None:
        self.result: Any = done
        self.extra: dict[str, Any] = {}

    def __call__(self, result: Any) -> Any:
        self.result = result
        return result


@contextmanager
def logged(
    calls: CallLog, tool: str, args: dict[str, Any] | None = None, done: str = 'ok'
) -> Iterator[Record]:
    """Log the call with its arguments and outcome (stderr, and a line in the call log on
    disk); the project's errors become tool errors (the SDK shows a ToolError's text to the
    model, and hides any other exception's)."""
    rec = Record(done)
    args = args or {}
    try:
        yield rec
    except PalletizerError as exc:
        _log.info('%s(%s): refused: %s', tool, args, exc)
        calls.append(tool, args, 'refused', str(exc), **rec.extra)
        raise ToolRefused(str(exc)) from exc
    except Exception as exc:
        _log.info('%s(%s): error: %s: %s', tool, args, type(exc).__name__, exc)
        calls.append(tool, args, 'error', f'{type(exc).__name__}: {exc}', **rec.extra)
        raise
    out = rec.result
    text = out.model_dump_json() if isinstance(out, BaseModel) else str(out)
    _log.info('%s(%s): %s', tool, args, done)
    calls.append(tool, args, 'ok', text, **rec.extra)


def bearer_app(app: Any, token: str) -> Any:
    """An ASGI app that answers 401 to any HTTP request without `Authorization: Bearer
    <token>`, and passes the rest (and the lifespan) to `app`."""
    expected = f'Bearer {token}'.encode()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope['type'] == 'http':
            auth = dict(scope.get('headers') or []).get(b'authorization', b'')
            if not secrets.compare_digest(auth, expected):
                body = (
                    b'{"error": "this needs the bearer token scripts/mcp printed when it '
                    b'started (Authorization: Bearer <token>)"}'
                )
                await send(
                    {
                        'type': 'http.response.start',
                        'status': 401,
                        'headers': [
                            (b'content-type', b'application/json'),
                            (b'www-authenticate', b'Bearer'),
                        ],
                    }
                )
                await send({'type': 'http.response.body', 'body': body})
                return
        await app(scope, receive, send)

    return guarded
