"""`scripts/mcp`: the cell as Model Context Protocol tools, for AI assistants (docs/mcp.md).

A small, task-level surface on the official MCP Python SDK (`mcp`, MIT; its MCPServer API):
list the levels, read and set the pallet spec, preview a placement, run one episode with
progress per carton, stop it, read the cell's state. Every limit is enforced here (mcp_cell.py),
never left to the model; only run_episode moves the arm, and only inside an episode.

Transports: stdio (the default: the client starts this process), or streamable HTTP on
127.0.0.1 with a bearer token, printed at start when not given, as `scripts/panel` does. Another
address needs --host ADDR --allow-remote.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from palletizer.cli.mcp_cell import SPEED_CAP, SPEED_CAP_MAX, Cell
from palletizer.cli.mcp_models import (
    CellState,
    EpisodeOutcome,
    LevelList,
    PreviewResult,
    Seed,
    SpecDoc,
    SpecResult,
    StopResult,
)
from palletizer.cli.mcp_preview import DIM_MAX_M
from palletizer.core.config import load_config
from palletizer.core.errors import PalletizerError
from palletizer.core.vocab import PerceptionMode, PlannerKind
from palletizer.panel.listen import LOOPBACK, listen_problem

__all__ = ['DEFAULT_PORT', 'ToolRefused', 'bearer_app', 'build_server', 'main']

DEFAULT_PORT = 8771  # beside the panel (8770)
POLL_S = 0.2  # how often run_episode reads the run's console for news
_log = logging.getLogger('palletizer.mcp')

_READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True)
_SET = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
_RUN = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False)
_STOP = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)


class ToolRefused(PalletizerError, ToolError):
    """A tool call the server refuses; the assistant reads its message (what was wrong and what
    is allowed) as the tool's error result."""


@contextmanager
def _call(tool: str, args: dict[str, Any] | None = None, done: str = 'ok') -> Iterator[None]:
    """Log the call with its arguments and outcome (stderr); the project's errors become tool
    errors (the SDK shows a ToolError's text to the model, and hides any other exception's)."""
    try:
        yield
    except PalletizerError as exc:
        _log.info('%s(%s): refused: %s', tool, args or {}, exc)
        raise ToolRefused(str(exc)) from exc
    _log.info('%s(%s): %s', tool, args or {}, done)


Dims = Annotated[
    list[Annotated[float, Field(gt=0.0, le=DIM_MAX_M)]],
    Field(min_length=3, max_length=3, description='carton L, W, H [m]'),
]


def build_server(cell: Cell) -> MCPServer:
    """The MCP server over `cell`: its tools and the `cell://state` resource."""
    mcp = MCPServer(
        'palletizer',
        title='palletizer cell',
        instructions=(
            'A simulated UR10e palletizing cell. Read list_levels and get_cell_state first. '
            'set_pallet_spec validates a pallet spec; preview_placement asks the planner '
            'without moving anything; run_episode runs one episode (seeds 1-100, one at a '
            'time) and stop stops it.'
        ),
        log_level='WARNING',
    )

    @mcp.tool(annotations=_READ)
    def list_levels() -> LevelList:
        """The levels (configs/levels.yaml): id, carton source, name and carton count."""
        with _call('list_levels'):
            return cell.levels()

    @mcp.tool(annotations=_READ)
    def get_pallet_spec() -> SpecResult:
        """The current pallet spec, which preview_placement and the next run_episode use."""
        with _call('get_pallet_spec'):
            return cell.spec_result()

    @mcp.tool(annotations=_SET)
    def set_pallet_spec(spec: SpecDoc = None) -> SpecResult:
        """Validate a pallet spec (limits and rules, docs/pallet-spec.md) and make it current.

        Returns the normalised spec, or an error naming each bad key, the value given and what
        is allowed; the current spec is then left as it was. null or {} clears it.
        """
        with _call('set_pallet_spec', {'spec': spec}):
            return cell.set_spec(spec)

    @mcp.tool(annotations=_READ)
    def preview_placement(
        dims_m: Dims,
        mass_kg: Annotated[float, Field(gt=0.0, description='carton mass [kg]')],
        stack: Annotated[
            Literal['current', 'empty'],
            Field(description="'current': the last episode's stack; 'empty': an empty pallet"),
        ] = 'current',
        planner: PlannerKind = PlannerKind.heuristic,
    ) -> PreviewResult:
        """Where the planner would put a carton of these dimensions and mass, with its score
        terms and the stack's stability margin. Nothing moves."""
        with _call('preview_placement', {'dims_m': dims_m, 'mass_kg': mass_kg, 'stack': stack}):
            return cell.preview(dims_m, mass_kg, stack, planner)

    @mcp.tool(annotations=_RUN)
    async def run_episode(
        ctx: Context,
        level: Annotated[int, Field(description='a level id from list_levels')],
        seed: Seed = 1,
        planner: PlannerKind = PlannerKind.heuristic,
        speed: Annotated[
            float,
            Field(
                ge=0.0,
                le=SPEED_CAP_MAX,
                description='0 = fast-forward; 1 = real UR10e speed; capped by the server '
                '(get_cell_state limits.speed_max)',
            ),
        ] = 0.0,
        perception: PerceptionMode = PerceptionMode.cameras,
    ) -> EpisodeOutcome:
        """Run one episode of a level through the full node graph, with a progress
        notification per carton; cancelling the call stops the episode. Returns the episode
        line. One run at a time."""
        args = {
            'level': level,
            'seed': seed,
            'planner': planner.value,
            'speed': speed,
            'perception': perception.value,
        }
        with _call('run_episode', args, done='started'):
            cell.start(cell.request(level, seed, planner, speed, perception))
        total = cell.cartons_total
        try:
            while True:
                finished = cell.done
                new = cell.poll()
                before = cell.cartons_done - len(new)
                for done, row in enumerate(new, start=before + 1):
                    status = 'placed' if row.placed else 'NOT PLACED'
                    await ctx.report_progress(
                        done, total, f'{row.package_id} ({row.type}) L{row.layer}: {status}'
                    )
                if finished:
                    break
                await anyio.sleep(POLL_S)
        except BaseException:
            # Cancelled, or the client is gone: no episode runs on unwatched. stop() is
            # synchronous (a signal to the launcher), so it runs inside a cancelled scope too.
            cell.stop()
            _log.info('run_episode(%s): cancelled; the episode was told to stop', args)
            raise
        with _call('run_episode', args, done='ended'):
            return cell.outcome()

    @mcp.tool(annotations=_STOP)
    def stop() -> StopResult:
        """Stop the running episode (as Ctrl-C would: telemetry closes it as aborted). Always
        allowed; with nothing running it says so."""
        with _call('stop'):
            return cell.stop()

    @mcp.tool(annotations=_READ)
    def get_cell_state() -> CellState:
        """The run, the episode's cartons so far with their margins, the held carton, the last
        episode line, the last failure, the pallet spec and the run limits."""
        with _call('get_cell_state'):
            return cell.state()

    @mcp.resource('cell://state', mime_type='application/json')
    def cell_state() -> str:
        """The cell's state, as get_cell_state returns it."""
        return cell.state().model_dump_json()

    return mcp


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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog='scripts/mcp',
        description='Serve the palletizing cell to MCP clients (AI assistants) over stdio or '
        'streamable HTTP.',
    )
    p.add_argument('--transport', choices=('stdio', 'http'), default='stdio')
    p.add_argument('--host', default='127.0.0.1', help='HTTP: address (default 127.0.0.1)')
    p.add_argument('--port', type=int, default=DEFAULT_PORT, help=f'HTTP: default {DEFAULT_PORT}')
    p.add_argument(
        '--allow-remote',
        action='store_true',
        help='required to listen on an address other than loopback (anyone who can reach it '
        'and has the token can run episodes)',
    )
    p.add_argument(
        '--token', default=None, help='HTTP: bearer token (default: a random one, printed)'
    )
    p.add_argument(
        '--max-speed',
        type=float,
        default=SPEED_CAP,
        help=f'the speed cap of run_episode, > 0 and <= {SPEED_CAP_MAX} (default {SPEED_CAP}: '
        'real UR10e speed; 0, fast-forward, is always allowed)',
    )
    p.add_argument(
        '--runs',
        default=None,
        help="runs folder the episodes write to (default: telemetry.yaml's)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    problem = listen_problem('mcp', args.host, args.port, args.allow_remote, 'run episodes')
    if problem:
        print(problem, file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format='[mcp] %(message)s')
    runs_dir = Path(os.path.expanduser(args.runs or load_config().telemetry.runs_dir))
    try:
        cell = Cell(Path.cwd(), runs_dir.resolve(), speed_cap=args.max_speed)
    except PalletizerError as exc:
        print(f'mcp: error: {exc}', file=sys.stderr)
        return 2
    server = build_server(cell)
    try:
        if args.transport == 'stdio':  # stdout is the protocol's: everything else to stderr
            server.run('stdio')
            return 0
        import uvicorn

        token = args.token or os.environ.get('PALLETIZER_MCP_TOKEN') or secrets.token_urlsafe(24)
        app = bearer_app(server.streamable_http_app(host=args.host), token)
        shown = 'localhost' if args.host in LOOPBACK else args.host
        print(
            f'palletizer MCP server on http://{shown}:{args.port}/mcp\n'
            f'  token: {token} (send Authorization: Bearer <token>); episodes write to '
            f'{runs_dir.resolve()}; Ctrl-C stops the server (and an episode it started)',
            flush=True,
        )
        config = uvicorn.Config(
            app, host=args.host, port=args.port, log_level='warning', timeout_graceful_shutdown=5
        )
        uvicorn.Server(config).run()
    finally:
        cell.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
