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
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from palletizer.cli.mcp_calls import CALL_LOG, CallLog, ToolRefused, bearer_app, logged
from palletizer.cli.mcp_cell import ROBOTS, SPEED_CAP_MAX, Cell
from palletizer.cli.mcp_models import (
    CellState,
    EpisodeOutcome,
    LevelList,
    PreviewResult,
    RunDetail,
    RunList,
    Seed,
    SpecDoc,
    SpecResult,
    StopResult,
)
from palletizer.cli.mcp_preview import DIM_MAX_M
from palletizer.cli.mcp_runs import RUNS_LIMIT, RUNS_LIMIT_MAX, Runs
from palletizer.cli.mcp_stability import StabilityResult
from palletizer.cli.mcp_stability import check_stability as check_stability_of
from palletizer.core.config import load_config
from palletizer.core.errors import InvalidValue, PalletizerError
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


Dims = Annotated[
    list[Annotated[float, Field(gt=0.0, le=DIM_MAX_M)]],
    Field(min_length=3, max_length=3, description='carton L, W, H [m]'),
]


def build_server(cell: Cell, calls: CallLog | None = None) -> MCPServer:
    """The MCP server over `cell`: its tools and the `cell://state` resource. Each call is
    logged to `calls` (default: the call log in the cell's runs folder)."""
    calls = calls or CallLog(cell.runs_dir / CALL_LOG)
    runs = Runs(cell.runs_dir, calls)
    mcp = MCPServer(
        'palletizer',
        title='palletizer cell',
        instructions=(
            'A simulated UR10e palletizing cell. Read list_levels and get_cell_state first. '
            'set_pallet_spec validates a pallet spec; preview_placement asks the planner '
            'without moving anything; run_episode runs one episode (seeds 1-100, one at a '
            'time) and stop stops it; list_runs and get_run read the runs back from disk.'
            if cell.robot == 'sim'
            else 'A real UR10e palletizing cell: the simulation-only tools run_episode and '
            'check_stability are off. '
            'list_levels, the pallet spec, preview_placement, '
            'get_cell_state, list_runs and get_run work as in simulation.'
        ),
        log_level='WARNING',
    )

    @mcp.tool(annotations=_READ)
    def list_levels() -> LevelList:
        """The levels (configs/levels.yaml): id, carton source, name and carton count."""
        with logged(calls, 'list_levels') as done:
            return done(cell.levels())

    @mcp.tool(annotations=_READ)
    def get_pallet_spec() -> SpecResult:
        """The current pallet spec, which preview_placement and the next run_episode use."""
        with logged(calls, 'get_pallet_spec') as done:
            return done(cell.spec_result())

    @mcp.tool(annotations=_SET)
    def set_pallet_spec(spec: SpecDoc = None) -> SpecResult:
        """Validate a pallet spec (limits and rules, docs/pallet-spec.md) and make it current.

        Returns the normalised spec, or an error naming each bad key, the value given and what
        is allowed; the current spec is then left as it was. null or {} clears it.
        """
        with logged(calls, 'set_pallet_spec', {'spec': spec}) as done:
            return done(cell.set_spec(spec))

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
        args = {'dims_m': dims_m, 'mass_kg': mass_kg, 'stack': stack, 'planner': planner.value}
        with logged(calls, 'preview_placement', args) as done:
            return done(cell.preview(dims_m, mass_kg, stack, planner))

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
        with logged(calls, 'run_episode', args, done='started') as done:
            cell.start(cell.request(level, seed, planner, speed, perception))
            done(f'started: pid {cell.run_info().pid}')
        total = cell.cartons_total
        try:
            while True:
                finished = cell.done
                new = cell.poll()
                before = cell.cartons_done - len(new)
                for n, row in enumerate(new, start=before + 1):
                    status = 'placed' if row.placed else 'NOT PLACED'
                    await ctx.report_progress(
                        n, total, f'{row.package_id} ({row.type}) L{row.layer}: {status}'
                    )
                if finished:
                    break
                await anyio.sleep(POLL_S)
        except BaseException:
            # Cancelled, or the client is gone: no episode runs on unwatched. stop() is
            # synchronous (a signal to the launcher), so it runs inside a cancelled scope too.
            cell.stop()
            _log.info('run_episode(%s): cancelled; the episode was told to stop', args)
            calls.append(
                'run_episode', args, 'error', 'cancelled; the episode was told to stop',
                run_dir=cell.run_info().run_dir,
            )  # fmt: skip
            raise
        with logged(calls, 'run_episode', args, done='ended') as done:
            out = cell.outcome()
            done.extra['run_dir'] = out.run.run_dir
            return done(out)

    @mcp.tool(annotations=_STOP)
    def stop() -> StopResult:
        """Stop the running episode (as Ctrl-C would: telemetry closes it as aborted). Always
        allowed; with nothing running it says so."""
        with logged(calls, 'stop') as done:
            return done(cell.stop())

    @mcp.tool(annotations=_READ)
    def get_cell_state() -> CellState:
        """The run, the episode's cartons so far with their margins, the held carton, the last
        episode line, the last failure, the pallet spec and the run limits."""
        with logged(calls, 'get_cell_state') as done:
            return done(cell.state())

    @mcp.tool(annotations=_READ)
    def list_runs(
        limit: Annotated[
            int, Field(ge=1, le=RUNS_LIMIT_MAX, description='the most runs to list (newest first)')
        ] = RUNS_LIMIT,
    ) -> RunList:
        """The runs in the runs folder the episodes write to, newest first: level, seeds,
        planner, episodes and outcome of each. Read from disk, the source of truth."""
        with logged(calls, 'list_runs', {'limit': limit}) as done:
            return done(runs.list(limit))

    @mcp.tool(annotations=_READ)
    def get_run(
        run_id: Annotated[str, Field(description="a run's id (folder name) from list_runs")],
    ) -> RunDetail:
        """One run by its id (list_runs): its summary and its episode lines as telemetry
        wrote them to disk (episodes.jsonl)."""
        with logged(calls, 'get_run', {'run_id': run_id}) as done:
            return done(runs.get(run_id))

    @mcp.tool(annotations=_READ)
    async def check_stability(
        run_id: Annotated[
            str | None,
            Field(description="a run's id from list_runs; null: this server's last episode"),
        ] = None,
        seed: Annotated[
            Seed | None, Field(description="the episode's seed; null: the run's last")
        ] = None,
    ) -> StabilityResult:
        """The jolt, beam and EUMOS trials (configs/stability.yaml) on an episode's stack,
        rebuilt from its placements in the simulated cell (simulation only; a few seconds to
        a minute). Nothing real moves."""
        with logged(calls, 'check_stability', {'run_id': run_id, 'seed': seed}) as done:
            return done(
                await anyio.to_thread.run_sync(
                    lambda: check_stability_of(cell, runs, run_id, seed)
                )
            )

    @mcp.resource('cell://state', mime_type='application/json')
    def cell_state() -> str:
        """The cell's state, as get_cell_state returns it."""
        return cell.state().model_dump_json()

    return mcp


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
        default=None,
        help="lower run_episode's speed cap below telemetry.yaml mcp.speed_cap (default: that "
        'cap, 1 = real UR10e speed; 0, fast-forward, is always allowed)',
    )
    p.add_argument(
        '--robot',
        choices=ROBOTS,
        default='sim',
        help="as scripts/palletize robot:=; 'ur': the server stands beside a real UR10e cell "
        'and its simulation-only tools (run_episode, check_stability) are off',
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
    try:
        telemetry = load_config().telemetry
        cap = telemetry.mcp.speed_cap
        if args.max_speed is not None:
            if not 0.0 < args.max_speed <= cap:
                raise InvalidValue(
                    f'--max-speed {args.max_speed}; expected > 0 and <= {cap} (telemetry.yaml '
                    'mcp.speed_cap: the flag may lower the cap, not raise it)'
                )
            cap = args.max_speed
        runs_dir = Path(os.path.expanduser(args.runs or telemetry.runs_dir))
        cell = Cell(Path.cwd(), runs_dir.resolve(), speed_cap=cap, robot=args.robot)
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
