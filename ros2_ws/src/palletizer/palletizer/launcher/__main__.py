"""Standalone launcher: `python -m palletizer.launcher [table|conveyor|truck] name:=value ...`.

Spawns the same graph as `ros2 launch palletizer <level|table|conveyor|truck>.launch.py` from the
same description, with the same arguments, on a machine without the launch package.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from palletizer.core.errors import PalletizerError
from palletizer.core.vocab import SourceKind
from palletizer.launcher.domain import claim_domain
from palletizer.launcher.graph import LAUNCH_ARGUMENTS, describe, parse_launch_args
from palletizer.launcher.process import GraphRunner
from palletizer.telemetry.replica import replica_line

USAGE = (
    'usage: launch_graph [level|table|conveyor|truck] [name:=value ...]\n'
    'arguments:\n'
    + '\n'.join(
        f'  {a.name}:=  {a.description} (default {a.default or "-"})' for a in LAUNCH_ARGUMENTS
    )
)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ('-h', '--help'):
        print(USAGE)
        return 0
    source = None
    if args and ':=' not in args[0]:
        first = args.pop(0).removesuffix('.launch.py')
        if first not in ('level', *SourceKind.names()):
            print(
                f'error: unknown launch file {first!r}; expected level, '
                f'{", ".join(SourceKind.names()[:-1])} or {SourceKind.names()[-1]}',
                file=sys.stderr,
            )
            return 2
        source = None if first == 'level' else first
    try:
        opts = parse_launch_args(args, source=source)
        domain = claim_domain(robot=opts.robot)  # the run's own DDS domain, held until exit
        runner = GraphRunner(describe(opts), log_level=opts.log_level, env=domain.env)
    except PalletizerError as exc:
        print(f'error: {exc}', file=sys.stderr)
        return 2

    runner.stop_on_signals()
    runner.log('launcher', domain.banner())
    runner.log(
        'launcher',
        f'level {opts.level} ({opts.source}), seed {opts.seed}, '
        f'{opts.episodes} episode(s), planner {opts.planner}, speed {opts.speed:g}, '
        f'robot {opts.robot}, telemetry {opts.telemetry}: {replica_line(opts.telemetry)}',
    )
    try:
        runner.start()
        return runner.run()
    except PalletizerError as exc:
        runner.stop(str(exc))
        print(f'error: {exc}', file=sys.stderr)
        return 2


if __name__ == '__main__':
    sys.exit(main())
