"""`scripts/palletize`: run episodes of a level through the full node graph on real rclpy.

Options mirror the launch arguments (`--level 23` is `level:=23`); `name:=value` arguments are
accepted too. Bad arguments fail before anything starts.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Sequence
from typing import NoReturn

from palletizer.core.config import SOURCES
from palletizer.core.errors import GraphError, PalletizerError
from palletizer.launcher.domain import claim_domain
from palletizer.launcher.graph import (
    CELL_PROFILES,
    FOXGLOVE_PORT,
    PERCEPTION_MODES,
    PLANNERS,
    ROBOTS,
    SEED_MAX,
    TELEMETRY_MODES,
    VIZ_MODES,
    GraphOptions,
    check_runs_folder,
    describe,
    options_from_mapping,
)
from palletizer.launcher.process import GraphRunner
from palletizer.telemetry.replica import replica_line

__all__ = ['build_options', 'main', 'missing_nodes']

# Which capability each node brings, for the message when a node is not there yet.
_NODE_ROLES = {
    'cell_bridge': 'the MuJoCo cell and its bridge',
    'state_publisher': 'the robot description and link TFs',
    'depth_fusion': 'height-map fusion and carton detection',
    'wrist_gauge': 'in-hand weighing from the wrist wrench',
    'planner': 'the placement planner service',
    'trajectory_executor': 'IK, trajectories and the pick/place actions',
    'telemetry': 'disk telemetry and bags',
    'episode_director': 'the episode loop',
    'foxglove_bridge': 'the Foxglove WebSocket server (viz:=foxglove)',
    'viz_markers': 'the markers RViz shows (/palletizer/markers)',
}


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are GraphError: main() prints one line and returns 2."""

    def error(self, message: str) -> NoReturn:
        raise GraphError(message)


class _Given(argparse.Action):
    """Record (launch argument name, value, as typed) in order, for the duplicate check."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        value = self.const if self.nargs == 0 else values
        typed = option_string if self.nargs == 0 else f'{option_string} {values}'
        given = [*getattr(namespace, 'given', []), (self.dest, value, typed)]
        namespace.given = given


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog='scripts/palletize',
        description='Palletize the cartons of a level with the full ROS 2 node graph.',
        epilog='name:=value launch arguments (as for ros2 launch) are accepted as well.',
        argument_default=argparse.SUPPRESS,
    )
    # Values stay text: options_from_mapping checks them as it checks name:=value arguments.
    p.add_argument('-n', '--episodes', action=_Given, help='episodes to run (>= 1; default 1)')
    p.add_argument(
        '--seed',
        action=_Given,
        help=f'seed of the first episode, 0-{SEED_MAX}; episode k uses seed + k (default 1)',
    )
    p.add_argument(
        '--level', action=_Given, help="level id (default: the source's first level, else 11)"
    )
    p.add_argument(
        '--source',
        action=_Given,
        metavar='{' + ','.join(SOURCES) + '}',
        help='restrict to a source',
    )
    p.add_argument('--planner', action=_Given, metavar='{' + ','.join(PLANNERS) + '}')
    p.add_argument(
        '--planner-weights',
        action=_Given,
        dest='planner_weights',
        metavar='FILE',
        help="heuristic weights file (e.g. scripts/train's best_weights.json); "
        'planner_weights:=FILE',
    )
    p.add_argument(
        '--spec',
        action=_Given,
        dest='pallet_spec',
        metavar='FILE',
        help='pallet spec (docs/pallet-spec.md): the planner keeps its hard rules and each '
        "episode line measures the stack against it (default: the level's own, on rule levels "
        '18, 24 and 35; none: no spec); pallet_spec:=FILE',
    )
    p.add_argument(
        '--perception',
        action=_Given,
        metavar='{' + ','.join(PERCEPTION_MODES) + '}',
        help='cameras (default) or oracle: simulator truth, the run is flagged oracle',
    )
    p.add_argument('--speed', action=_Given, help='0 = fast-forward (default); 1 = real UR speed')
    p.add_argument(
        '--telemetry',
        action=_Given,
        metavar='{' + ','.join(TELEMETRY_MODES) + '}',
        help='disk (default); postgres or supabase: disk plus a live replica; off: nothing',
    )
    p.add_argument(
        '--no-telemetry',
        action=_Given,
        dest='telemetry',
        nargs=0,
        const='off',
        help='write nothing (telemetry off)',
    )
    p.add_argument('--robot', action=_Given, metavar='{' + ','.join(ROBOTS) + '}')
    p.add_argument(
        '--cell',
        action=_Given,
        metavar='{' + ','.join(CELL_PROFILES) + '}',
        help='hardware: the simulated cell runs on in real time and the palletizer uses only a '
        "real UR10e cell's interfaces (docs/real-cell.md; needs --speed > 0); default lockstep",
    )
    p.add_argument(
        '--stability',
        action=_Given,
        nargs=0,
        const='true',
        help='after each episode, shake the stack with the physical stability trials '
        '(results in the episode line, metrics.stability)',
    )
    p.add_argument(
        '--viz',
        action=_Given,
        metavar='{' + ','.join(VIZ_MODES) + '}',
        help=f'foxglove: also serve the topics on ws://127.0.0.1:{FOXGLOVE_PORT} (default none)',
    )
    return p


def build_options(argv: Sequence[str]) -> GraphOptions:
    """Parse command-line options into validated GraphOptions (raises PalletizerError).

    An option and a `name:=value` for the same thing, or one given twice, must agree.
    """
    ns = _parser().parse_args([a for a in argv if ':=' not in a])
    values: dict[str, str] = {}
    typed: dict[str, str] = {}

    def put(name: str, value: str, text: str) -> None:
        if name in values and values[name] != value:
            raise GraphError(
                f'{name} given twice with different values: {typed[name]} and {text}; give it once'
            )
        values[name], typed[name] = value, text

    for name, value, text in getattr(ns, 'given', []):
        put(name, value, text)
    source = values.pop('source', None)  # an option only: no launch argument restricts the source
    for arg in argv:
        if ':=' in arg:
            name, _, value = arg.partition(':=')
            put(name, value, arg)
    return options_from_mapping(values, source=source)


def missing_nodes(opts: GraphOptions) -> list[str]:
    """Nodes of the graph whose module is not in this installation yet."""
    return [
        n.name
        for n in describe(opts)
        if importlib.util.find_spec(f'palletizer.nodes.{n.executable}') is None
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        opts = build_options(args)
    except PalletizerError as exc:
        print(f'palletize: error: {exc}', file=sys.stderr)
        return 2
    missing = missing_nodes(opts)
    if missing:
        lines = '\n'.join(f'  - {n}: {_NODE_ROLES.get(n, n)}' for n in missing)
        print(
            f'palletize: level {opts.level} ({opts.source}) cannot run yet; these nodes of the '
            f'graph are not implemented in this version:\n{lines}',
            file=sys.stderr,
        )
        return 3
    try:  # a runs folder that cannot take the run fails now, not after the episodes
        check_runs_folder(opts)
    except PalletizerError as exc:
        print(f'palletize: error: {exc}', file=sys.stderr)
        return 2
    try:  # the run's own DDS domain, held while it runs (docs/running.md "Runs are isolated")
        domain = claim_domain(robot=opts.robot)
    except PalletizerError as exc:
        print(f'palletize: error: {exc}', file=sys.stderr)
        return 2
    with domain:
        runner = GraphRunner(describe(opts), log_level=opts.log_level, env=domain.env)
        runner.stop_on_signals()
        runner.log('launcher', domain.banner())
        runner.log('launcher', f'telemetry {opts.telemetry}: {replica_line(opts.telemetry)}')
        runner.start()
        return runner.run()


if __name__ == '__main__':
    sys.exit(main())
