"""`scripts/panel`: the operator panel, a FastAPI app served by uvicorn.

FastAPI (MIT) on uvicorn (BSD-3) because the panel needs an HTTP API, static files and a
WebSocket with one small, typed, well-kept stack; the standard library's http.server has no
WebSocket. The page's JavaScript (three.js) comes from npm at set-up (panel/web/package-lock.json)
and is served from here: the page fetches nothing from any other host.

Every request needs the access token printed at start (as Jupyter does): `?token=` on the first
page load (the answer sets an HttpOnly cookie for the rest), the cookie, or an
`Authorization: Bearer` header. The WebSocket checks it too. The server listens on 127.0.0.1
unless --host names another address together with --allow-remote.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from palletizer.core.config import SOURCES, load_config
from palletizer.core.errors import PalletizerError
from palletizer.launcher.graph import PERCEPTION_MODES, PLANNERS, SEED_MAX, TELEMETRY_MODES
from palletizer.panel.listen import LOOPBACK, listen_problem
from palletizer.panel.replica import PREFIX as REPLICA_PREFIX
from palletizer.panel.replica import ReplicaHistory, replica_dsn
from palletizer.panel.runner import PanelError, RunManager, check_spec, request_from
from palletizer.panel.scene import list_runs, read_run

__all__ = ['PanelConfig', 'create_app', 'main']

WEB = Path(__file__).resolve().parent / 'web'
THREE = WEB / 'node_modules' / 'three'
COOKIE = 'palletizer_panel_token'
DEFAULT_PORT = 8770  # beside the Foxglove bridge (8765) and Jupyter (8888)
# Speed presets: 0 is fast-forward (the arm jumps; sim time still runs), the rest scale the real
# UR10e's speed (the launcher's speed:= argument, any number > 0).
SPEED_PRESETS = (
    ('fast-forward', 0.0),
    ('x0.25', 0.25),
    ('x0.5', 0.5),
    ('x1 (real UR speed)', 1.0),
    ('x2', 2.0),
)
EPISODES_MAX = 1000
PUSH_PERIOD_S = 0.1  # how often the WebSocket looks for news (the arm moves at 10 Hz on the page)


@dataclass(frozen=True)
class PanelConfig:
    token: str
    root: Path  # the repository: the run's working directory and where runs/ lives
    runs_dir: Path
    live: bool = True  # join each run's DDS domain for the live view
    replica_dsn: str = ''  # the Postgres replica the history also reads ('' = disk only)


def options() -> dict[str, Any]:
    """What the start form offers: the levels from configs/levels.yaml and the CLI's choices."""
    cfg = load_config()
    levels = [
        {'id': lv.id, 'source': lv.source, 'name': lv.name, 'n': lv.n}
        for lv in sorted(cfg.levels.values(), key=lambda lv: lv.id)
    ]
    return {
        'levels': levels,
        'sources': list(SOURCES),
        'default_level': cfg.default_level,
        'planners': list(PLANNERS),
        'default_planner': 'heuristic',
        'perception': list(PERCEPTION_MODES),
        'default_perception': 'cameras',
        'telemetry': list(TELEMETRY_MODES),
        'default_telemetry': 'disk',
        'speed_presets': [{'label': k, 'value': v} for k, v in SPEED_PRESETS],
        'seed_max': SEED_MAX,
        'episodes_max': EPISODES_MAX,
    }


def _run_dir(runs_dir: Path, name: str) -> Path:
    d = (runs_dir / name).resolve()
    if d.parent != runs_dir.resolve() or not d.is_dir():
        raise PanelError(f'no run named {name!r} in {runs_dir}', 404)
    return d


def create_app(cfg: PanelConfig, manager: RunManager | None = None, live: Any = None) -> Any:
    """The FastAPI app; `manager` defaults to one that runs in cfg.root with a live observer.
    With a manager of its own, the caller may pass the `LiveState` its observer feeds."""
    if not (THREE / 'build' / 'three.module.js').is_file():
        raise PanelError(
            f'three.js is not installed in {THREE}: run scripts/setup (it runs npm ci in {WEB})',
            500,
        )
    if manager is None:
        observe = None
        if cfg.live:
            from palletizer.panel.observer import LiveState, Observer

            live = LiveState()

            def observe(domain: int, level: int) -> Observer:
                live.reset()
                return Observer(domain, level, live)

        manager = RunManager(
            cfg.root,
            runs_dir=cfg.runs_dir,
            observe=observe,
            live_rows=(lambda: live.snapshot()['rows']) if live is not None else None,
        )
    app = FastAPI(title='palletizer panel', docs_url=None, redoc_url=None, openapi_url=None)
    app.state.manager = manager
    app.state.live = live

    def token_ok(value: str | None) -> bool:
        return bool(value) and secrets.compare_digest(str(value), cfg.token)

    def presented(headers: Any, query: Any, cookies: Any) -> str | None:
        auth = headers.get('authorization', '')
        if auth.lower().startswith('bearer '):
            return auth[7:].strip()
        return query.get('token') or cookies.get(COOKIE)

    @app.middleware('http')
    async def require_token(request: Request, call_next):
        if not token_ok(presented(request.headers, request.query_params, request.cookies)):
            text = (
                'palletizer panel: this needs the access token that scripts/panel printed '
                'when it started: open the URL it printed (…/?token=…).'
            )
            if request.url.path.startswith('/api/'):
                return JSONResponse({'detail': text}, status_code=401)
            return Response(text + '\n', status_code=401, media_type='text/plain')
        response = await call_next(request)
        if request.query_params.get('token'):
            response.set_cookie(COOKIE, cfg.token, httponly=True, samesite='strict')
        return response

    @app.exception_handler(PanelError)
    async def panel_error(_request: Request, exc: PanelError):
        return JSONResponse({'detail': str(exc)}, status_code=exc.status)

    @app.exception_handler(PalletizerError)
    async def palletizer_error(_request: Request, exc: PalletizerError):
        return JSONResponse({'detail': str(exc)}, status_code=400)

    @app.get('/', response_class=HTMLResponse)
    async def index() -> FileResponse:
        return FileResponse(WEB / 'index.html', headers={'Cache-Control': 'no-store'})

    app.mount('/static', StaticFiles(directory=WEB), name='static')
    app.mount('/vendor/three', StaticFiles(directory=THREE), name='three')

    @app.get('/api/options')
    async def get_options() -> dict[str, Any]:
        return options()

    @app.get('/api/spec')
    async def get_spec() -> dict[str, Any]:
        """The pallet spec's JSON Schema (the page builds its form from it) and the catalogue's
        types, which crush and fragile name."""
        from palletizer.core.pallet_spec import spec_schema

        return {'schema': spec_schema(), 'types': sorted(load_config().catalogue.types)}

    @app.post('/api/spec/check')
    async def check_pallet_spec(request: Request) -> Any:
        """Validate a spec: the normalised spec, or 422 with each problem's key, value and what
        is allowed."""
        from palletizer.core.pallet_spec import SpecError

        try:
            body = await request.json()
        except ValueError:
            raise PanelError('the request body must be a JSON object: the pallet spec') from None
        try:
            text, data = check_spec(body)
        except SpecError as exc:
            problems = [
                {'key': p.key, 'value': p.value, 'expected': p.expected} for p in exc.problems
            ]
            return JSONResponse({'detail': str(exc), 'problems': problems}, status_code=422)
        return {'spec': data, 'json': text}

    @app.post('/api/runs', status_code=201)
    async def start_run(request: Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise PanelError('the request body must be a JSON object of run options') from None
        if not isinstance(body, dict):
            raise PanelError('the request body must be a JSON object of run options')
        return manager.start(request_from(body))

    @app.post('/api/runs/stop')
    async def stop_run() -> dict[str, Any]:
        return manager.stop()

    @app.get('/api/run')
    async def get_run() -> dict[str, Any]:
        return manager.status()

    @app.get('/api/live')
    async def get_live() -> dict[str, Any]:
        return _live_message(live)

    @app.get('/api/live/camera.png')
    async def camera() -> Response:
        png = None if live is None else live.camera_png
        if png is None:
            raise PanelError('no station camera frame yet: it comes with the first detection', 404)
        return Response(png, media_type='image/png', headers={'Cache-Control': 'no-store'})

    @app.get('/api/live/robot')
    async def robot() -> dict[str, Any]:
        """The robot as the page draws it: the URDF from /robot_description, its root link's
        pose in the pallet frame (row-major 4x4) and the joint positions from /joint_states."""
        return _robot_message(live)

    replica = ReplicaHistory(cfg.replica_dsn) if cfg.replica_dsn else None

    @app.get('/api/history')
    def history() -> dict[str, Any]:
        runs = list_runs(cfg.runs_dir)
        note: dict[str, Any] = {'configured': replica is not None, 'error': None}
        if replica is not None:
            try:
                on_disk = {r['name'] for r in runs}
                runs += [r for r in replica.runs() if r['label'] not in on_disk]
            except PanelError as exc:  # the disk's runs are listed all the same
                note['error'] = str(exc)
        return {'runs': runs, 'replica': note}

    @app.get('/api/history/{name}')
    def history_run(name: str) -> dict[str, Any]:
        if name.startswith(REPLICA_PREFIX) and replica is not None:
            return replica.run(name)
        d = _run_dir(cfg.runs_dir, name)
        rec = read_run(d, url_prefix=f'/api/history/{name}')
        return {'name': rec.name, 'origin': 'disk', 'episodes': rec.episodes}

    @app.get('/api/history/{name}/files/{path:path}')
    async def history_file(name: str, path: str) -> FileResponse:
        d = _run_dir(cfg.runs_dir, name)
        f = (d / path).resolve()
        if not f.is_relative_to(d) or not f.is_file() or f.suffix != '.png':
            raise PanelError(f'no snapshot {path!r} in run {name}', 404)
        return FileResponse(f, media_type='image/png')

    @app.websocket('/ws')
    async def ws(socket: WebSocket) -> None:
        if not token_ok(presented(socket.headers, socket.query_params, socket.cookies)):
            await socket.close(code=1008, reason='missing or wrong access token')
            return
        await socket.accept()
        version = manager.version
        status = manager.status(log_lines=0)
        lines, index = manager.log_since(0)
        live_version = -1 if live is None else live.version
        robot_version = -1 if live is None else live.robot_version
        joints_version = -1 if live is None else live.joints_version
        try:
            await socket.send_json({'type': 'status', 'run': {**status, 'log': lines}})
            await socket.send_json({'type': 'live', 'live': _live_message(live)})
            await socket.send_json({'type': 'robot', 'robot': _robot_message(live)})
            while True:
                try:  # wait for news, or for the page to go (a closed page ends the handler)
                    msg = await asyncio.wait_for(socket.receive(), timeout=PUSH_PERIOD_S)
                    if msg.get('type') == 'websocket.disconnect':
                        return
                except TimeoutError:
                    pass
                new, index = manager.log_since(index)
                if new:
                    await socket.send_json({'type': 'log', 'lines': new})
                live_now = -1 if live is None else live.version
                if manager.version != version or live_now != live_version:
                    version = manager.version
                    await socket.send_json({'type': 'status', 'run': manager.status(log_lines=0)})
                if live_now != live_version:
                    live_version = live_now
                    await socket.send_json({'type': 'live', 'live': _live_message(live)})
                if live is not None and live.robot_version != robot_version:
                    robot_version = live.robot_version
                    await socket.send_json({'type': 'robot', 'robot': _robot_message(live)})
                if live is not None and live.joints_version != joints_version:
                    joints_version = live.joints_version
                    joints = live.joint_positions()
                    await socket.send_json({'type': 'joints', 'joints': joints})
        except (WebSocketDisconnect, RuntimeError):
            return

    return app


def _live_message(live: Any) -> dict[str, Any]:
    if live is None:
        return {'scene': None, 'heightmap': None, 'camera_seq': 0, 'detection': None}
    snap = live.snapshot()
    snap.pop('rows', None)
    return snap


def _robot_message(live: Any) -> dict[str, Any]:
    if live is None:
        return {'urdf': None, 'origin': None, 'joints': {}}
    return dict(live.robot())


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog='scripts/panel',
        description='Serve the operator panel: start, watch and compare runs in a browser.',
    )
    p.add_argument('--host', default='127.0.0.1', help='address to listen on (default 127.0.0.1)')
    p.add_argument('--port', type=int, default=DEFAULT_PORT, help=f'default {DEFAULT_PORT}')
    p.add_argument(
        '--allow-remote',
        action='store_true',
        help='required to listen on an address other than loopback (anyone who can reach it '
        'and has the token can start runs)',
    )
    p.add_argument(
        '--runs', default=None, help="runs folder for the history (default: telemetry.yaml's)"
    )
    p.add_argument(
        '--token', default=None, help='access token (default: a random one, printed at start)'
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    problem = listen_problem('panel', args.host, args.port, args.allow_remote, 'start runs')
    if problem:
        print(problem, file=sys.stderr)
        return 2
    root = Path.cwd()  # runs start here, as from a shell: telemetry's relative runs_dir holds
    runs_dir = Path(os.path.expanduser(args.runs or load_config().telemetry.runs_dir))
    token = args.token or os.environ.get('PALLETIZER_PANEL_TOKEN') or secrets.token_urlsafe(24)
    dsn = replica_dsn()
    cfg = PanelConfig(token=token, root=root, runs_dir=runs_dir.resolve(), replica_dsn=dsn)
    try:
        app = create_app(cfg)
    except PalletizerError as exc:
        print(f'panel: error: {exc}', file=sys.stderr)
        return 2
    import uvicorn

    from palletizer.telemetry.replica.postgres import redact_dsn

    shown = 'localhost' if args.host in LOOPBACK else args.host
    print(
        f'palletizer panel on http://{shown}:{args.port}/?token={token}\n'
        f'  history from {runs_dir.resolve()}'
        + (f' and the replica {redact_dsn(dsn)}' if dsn else '')
        + '; Ctrl-C stops the panel (and a run it started)',
        flush=True,
    )
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level='warning', timeout_graceful_shutdown=5
    )
    server = uvicorn.Server(config)
    try:
        server.run()
    finally:
        app.state.manager.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
