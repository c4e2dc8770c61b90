"""Where a token-guarded local server may listen: loopback, unless the user says otherwise.

scripts/panel and scripts/mcp serve on 127.0.0.1 by default; another address only with
--allow-remote, as anyone who reaches it with the token drives the cell.
"""

from __future__ import annotations

__all__ = ['LOOPBACK', 'listen_problem']

LOOPBACK = ('127.0.0.1', 'localhost', '::1')


def listen_problem(prog: str, host: str, port: int, allow_remote: bool, what: str) -> str:
    """The error line for --host/--port, '' when the server may listen there; `what`: what a
    remote user with the token could do (e.g. 'start runs')."""
    if host not in LOOPBACK and not allow_remote:
        return (
            f'{prog}: error: --host {host} is not loopback; add --allow-remote to listen there '
            f'(anyone who can reach it and has the token can {what})'
        )
    if not 1 <= port <= 65535:
        return f'{prog}: error: --port {port}; expected 1-65535'
    return ''
