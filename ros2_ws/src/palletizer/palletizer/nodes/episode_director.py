"""Episode director node: runs the episode loop of core/episode.py over the node graph.

It asks and does not compute: the cell presents, depth_fusion perceives, the executor picks and
places, the wrist gauge weighs, the planner plans, the referee measures. It publishes the episode
events, placements and pallet states, and has the telemetry node confirm what it wrote.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time

import rclpy
from palletizer_msgs.srv import BeginEpisode, EndEpisode
from rcl_interfaces.srv import GetParameters
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.client import Client
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from palletizer.core.config import load_config
from palletizer.core.contracts import EpisodeResult, PalletGeometry
from palletizer.core.episode import EpisodeSettings, run_episode
from palletizer.core.errors import PalletizerError
from palletizer.core.oracle import oracle_flag, reads_truth
from palletizer.core.placement_check import PlacementCheck
from palletizer.core.ports import EpisodeAborted
from palletizer.core.vocab import GaugeMode, PerceptionMode
from palletizer.nodes.calls import Calls, Timeouts
from palletizer.nodes.director_ports import RosCell, RosExecutor, RosPlanner, RosReferee, RosSink
from palletizer.nodes.line_ports import RosLine
from palletizer.nodes.params import declare
from palletizer.nodes.sensing_ports import RosGauge, RosPerception
from palletizer.nodes.spin import destroy_within, exit_now, init, spin_until_shutdown, start
from palletizer.version import git_sha

__all__ = ['MODE_PARAMETERS', 'EpisodeDirectorNode', 'main', 'summary_line']

# Exit codes (docs/running.md "Exit codes"); an interrupted run exits 130 (SIGINT).
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
# [s] how long robot:=ur waits for the driver's trajectory action once the director is up.
# The driver is started first, and discovery on one host takes well under a second. The
# director itself takes ~3.5 s to come up (measured under ros2 launch: the line came 14.3 s
# after the launch with a 10 s wait, 10.0 s with 6 s), so 5 s names a missing driver within
# 10 s of the launch on an unloaded machine.
DRIVER_WAIT_S = 5.0


class TelemetryRefused(PalletizerError):
    """Telemetry cannot record the next episode: the run stops before the cell resets."""

    def __init__(self, seed: int, reason: str, bad_input: bool) -> None:
        super().__init__(reason)
        self.seed, self.reason, self.bad_input = seed, reason, bad_input


def summary_line(r: EpisodeResult) -> str:
    """`seed 1: 4/4 · SUCCESS` (or the failure, or ABORTED)."""
    if r.metrics.get('aborted'):
        verdict = f'ABORTED ({r.metrics.get("abort_reason", "")})'
    else:
        verdict = 'SUCCESS' if r.success else f'FAILURE: {r.failure.value if r.failure else "?"}'
    return f'seed {r.seed}: {r.n_placed}/{r.n_objects} · {verdict}'


# Where each node reports what it runs: the height map, the detector, the gauge.
MODE_PARAMETERS: tuple[tuple[str, str, type[PerceptionMode] | type[GaugeMode]], ...] = (
    ('depth_fusion', 'map', PerceptionMode),
    ('depth_fusion', 'detector', PerceptionMode),
    ('wrist_gauge', 'mode', GaugeMode),
)


class EpisodeDirectorNode(Node):
    def __init__(self) -> None:
        super().__init__('episode_director')

        self.level = int(declare(self, 'level', 11, 'level id'))
        self.seed = int(
            declare(self, 'seed', 1, 'seed of the first episode; episode k uses seed + k')
        )
        self.episodes = int(declare(self, 'episodes', 1, 'number of episodes'))
        self.planner_kind = declare(self, 'planner', 'heuristic', 'heuristic | beam | grid')
        self.speed = float(
            declare(self, 'speed', 0.0, 'motion speed the cell runs at (0 = fast-forward)')
        )
        self.robot = declare(self, 'robot', 'sim', 'sim | ur')
        self.interfaces = declare(
            self,
            'cell_interfaces',
            'sim',
            "sim = the simulated cell's services (reset, present, settle, capture, ground "
            "truth); real = a real cell's I/O, clock and cameras alone (docs/real-cell.md)",
        )
        if self.interfaces not in ('sim', 'real'):
            raise PalletizerError(
                f'episode_director: cell_interfaces:={self.interfaces!r}; expected sim or real'
            )
        self.real = self.interfaces == 'real'
        set_io = declare(
            self, 'set_io_service', '/io_and_status_controller/set_io', 'the line: SetIO'
        )
        io_states = declare(
            self, 'io_states_topic', '/io_and_status_controller/io_states', 'the line: IOStates'
        )
        self.trajectory_action = declare(
            self,
            'trajectory_action',
            '/scaled_joint_trajectory_controller/follow_joint_trajectory',
            "the driver's FollowJointTrajectory action, looked for at start with robot:=ur",
        )
        self.stability = bool(
            declare(
                self,
                'stability',
                False,
                'run the stability trials on the stack after each episode',
            )
        )
        if self.stability and self.real:
            raise PalletizerError(
                'episode_director: stability:=true with cell_interfaces:=real; the trials shake '
                'the simulated stack, which a real cell cannot'
            )
        self.telemetry = declare(self, 'telemetry', 'disk', 'disk | postgres | supabase | off')
        cfg = load_config()
        gauge = cfg.perception.gauge
        hold = float(
            declare(
                self,
                'weigh_hold_s',
                gauge.samples / cfg.cell.wrench.rate_hz + gauge.settle_s,
                'arm held still before a wrist reading [s]: settle + the samples at the '
                'wrench rate',
            )
        )
        self.settings = EpisodeSettings.from_config(cfg.cell, cfg.planner.buffer)
        self.task = cfg.level(self.level).source
        self.n_objects = cfg.level(self.level).n  # the cartons the cell presents
        self.abort = threading.Event()
        self.calls = Calls(self, self.abort, Timeouts(speed=self.speed))
        self.group = ReentrantCallbackGroup()
        self.gauge = RosGauge(self, self.calls, hold)
        self.cell: RosCell | RosLine
        if self.real:
            # How long a carton may take to come: the conveyor's own jam time, sim seconds.
            self.cell = RosLine(
                self,
                self.calls,
                self.gauge,
                cfg.cell.hardware.line,
                set_io_service=set_io,
                io_states_topic=io_states,
                arrive_s=cfg.cell.conveyor.timeout_s,
                stopping=self.stopping,
            )
        else:
            self.cell = RosCell(self, self.calls, self.gauge)
        self.pallet = PalletGeometry.from_config(cfg.cell.pallet)
        self.gauge.cell = self.cell
        self.planner = RosPlanner(self, self.calls, self.planner_kind)
        self.motion = RosExecutor(
            self,
            self.calls,
            stamp=lambda: self.cell.stamp,
            refresh=lambda: self.cell.hold(0.0),  # a cell call that only reads the time
            clock=lambda: self.cell.sim_time(),
        )
        self.referee: RosReferee | PlacementCheck | None = (
            None if self.real else RosReferee(self, self.calls)
        )
        self.run_id = time.strftime('%Y%m%d-%H%M%S')
        # Photos only when telemetry writes them; the park before each is the executor's and
        # happens either way, so the episode is the same with and without telemetry.
        views = (
            tuple(v.value for v in cfg.telemetry.snapshots.views)
            if self.telemetry != 'off' and not self.real  # photos: a capture on request
            else ()
        )
        self.sink = RosSink(self, self.run_id, self.say, self.calls, views)
        self.begin_c = self.create_client(BeginEpisode, '/telemetry/begin_episode')
        self.end_c = self.create_client(EndEpisode, '/telemetry/end_episode')
        self.results: list[EpisodeResult] = []
        self._param_clients: dict[str, Client] = {}
        self.exit_code = 0
        self.finished = False  # set once run() is over, before it shuts the graph down

    def say(self, line: str) -> None:
        print(line, flush=True)

    def _param_of(self, node: str, name: str) -> str | None:
        """A parameter of another node, through its parameter service (read-only, retried)."""
        cli = self._param_clients.get(node)
        if cli is None:
            cli = self._param_clients[node] = self.create_client(
                GetParameters, f'/{node}/get_parameters'
            )
        req = GetParameters.Request(names=[name])
        res = self.calls.service(
            cli, req, f'{node} parameters', self.calls.t.quick_s, repeatable=True, retry_s=5.0
        )
        return res.values[0].string_value if res.values else None

    def _driver_missing(self) -> str:
        """With robot:=ur, why the episodes cannot run on the cell (the driver's trajectory
        action absent after DRIVER_WAIT_S, or the simulated cell's services, which the episodes
        still call, absent); '' when they can."""
        if self.robot != 'ur':
            return ''
        end = time.monotonic() + DRIVER_WAIT_S
        while not self._has_action(self.trajectory_action):
            if time.monotonic() >= end or self.stopping():
                return (
                    f'no FollowJointTrajectory server at {self.trajectory_action}: is '
                    'ur_robot_driver running and the External Control program playing?'
                )
            time.sleep(0.2)
        if not self.real:
            return (
                f'the UR driver is there ({self.trajectory_action}), but cell_interfaces:=sim '
                "calls the simulated cell's services: robot:=ur needs cell_interfaces:=real"
            )
        return ''

    def _has_action(self, name: str) -> bool:
        """An action server is up at `name`: only servers publish the goals' status (the
        executor's client makes the name show in the graph either way)."""
        return self.count_publishers(f'{name}/_action/status') > 0

    def run(self) -> None:
        """All episodes, in a worker thread while the executor spins."""
        try:
            missing = self._driver_missing()
            if missing:
                self.say(f'run stopped: {missing}')
                self.exit_code = EXIT_FAILED
                return
            modes = [self._param_of(node, name) or '?' for node, name, _ in MODE_PARAMETERS]
            map_mode, detector_mode, gauge_mode = modes
            kind = self._param_of('planner', 'kind') or self.planner_kind
            # The flag from what each node reports it runs (core/oracle.py): unreadable is truth.
            truth = [
                reads_truth(k, m) for (_, _, k), m in zip(MODE_PARAMETERS, modes, strict=True)
            ]
            oracle = oracle_flag(*truth, self.planner)
            perception = RosPerception(
                self,
                self.calls,
                oracle=oracle_flag(*truth[:2]),
                stamp=lambda: self.cell.stamp,
            )
            perception.on_heightmap = self.motion.set_heightmap
            if self.real:  # no ground truth: the palletizer checks its placements itself
                self.referee = PlacementCheck(perception, self.pallet)
            referee = self.referee
            assert referee is not None
            motion = 'fast-forward' if self.speed == 0 else f'interpolated x{self.speed:g}'
            self.say(
                f'palletizer · level {self.level} ({self.task}) · planner {kind} · map '
                f'{map_mode} · detector {detector_mode} · gauge {gauge_mode} · motion {motion} · '
                f'telemetry {self.telemetry} · cell interfaces {self.interfaces} · '
                f'oracle {str(oracle).lower()}'
            )
            sha = git_sha()
            for k in range(self.episodes):
                seed = self.seed + k
                self._open(seed, oracle, sha)
                self.sink.begin(seed)
                self.planner.reset()
                perception.reset()
                if isinstance(referee, PlacementCheck):
                    referee.reset()
                self.motion.set_heightmap(None)
                result = run_episode(
                    level=self.level,
                    seed=seed,
                    task=self.task,
                    cell=self.cell,
                    perception=perception,
                    gauge=self.gauge,
                    planner=self.planner,
                    executor=self.motion,
                    referee=referee,
                    sink=self.sink,
                    settings=self.settings,
                    oracle=oracle,
                    git_sha=sha,
                )
                if self.stability and not result.metrics.get('aborted') and result.n_placed:
                    result = self._stability(result)
                self._close(result)
                finish = getattr(self.cell, 'finish', None)
                if finish is not None:  # the line's pallet exchange (real cell interfaces)
                    why = finish()
                    if why:
                        self.say(f'  {why}')
                self.results.append(result)
                self.say(summary_line(result))
                if result.metrics.get('aborted'):
                    break
            ok = sum(r.success for r in self.results)
            self.say(f'{ok}/{len(self.results)} episodes succeeded')
            self.exit_code = EXIT_OK if ok == len(self.results) == self.episodes else EXIT_FAILED
            if self.stopping():
                self.exit_code = EXIT_INTERRUPTED
        except TelemetryRefused as exc:
            self.say(f'run stopped before seed {exc.seed}: {exc.reason}')
            self.exit_code = EXIT_BAD_INPUT if exc.bad_input else EXIT_FAILED
        except EpisodeAborted as exc:
            self.say(f'run aborted: {exc.reason}')
            self.exit_code = EXIT_INTERRUPTED if self.stopping() else EXIT_FAILED
        except Exception as exc:  # report, then stop the graph: never leave it hanging
            if self.stopping():
                # the call in progress, cut short by the stop (the context is shut down)
                self.say(f'run aborted: stopped from outside during a call ({type(exc).__name__})')
                self.exit_code = EXIT_INTERRUPTED
                return
            self.say(f'director error: {type(exc).__name__}: {exc}')
            self.exit_code = EXIT_FAILED
            raise
        finally:
            self.finished = True
            rclpy.try_shutdown()

    def stopping(self) -> bool:
        """A stop from outside is under way: Ctrl-C or SIGTERM shut the context down."""
        return self.abort.is_set() or not self.context.ok()

    def _stability(self, result: EpisodeResult) -> EpisodeResult:
        """The stability trials on the episode's stack, into metrics.stability."""
        assert isinstance(self.referee, RosReferee)  # stability:=true is sim-only
        summary = self.referee.stability()
        beams = summary.get('beam_held') or {}
        self.say(
            f'stability: {"held" if summary.get("held_all") else "did not hold"} all '
            f'{summary.get("trial_count", 0)} jolts · falls {summary.get("falls", 0)} · score '
            f'mean {summary.get("mean_score")} min {summary.get("min_score")} · beams '
            + (', '.join(f'{ax} {"held" if ok else "failed"}' for ax, ok in beams.items()) or '-')
            + f' · EUMOS {"held" if summary.get("eumos_held") else "failed"}'
        )
        return dataclasses.replace(result, metrics={**result.metrics, 'stability': summary})

    def _open(self, seed: int, oracle: bool, sha: str) -> None:
        """Have telemetry open the episode before the cell resets; a refusal stops the run.

        The run facts go with it, so that even an episode aborted before its first event has
        its level, task and oracle flag on disk.
        """
        if self.telemetry == 'off':
            return
        info = {
            'level': self.level,
            'task': self.task,
            'oracle': oracle,
            'git_sha': sha,
            # A real cell's line does not say how many cartons come: counted as they come.
            'n_objects': None if self.real else self.n_objects,
        }
        req = BeginEpisode.Request(seed=seed, run_id=self.run_id, info_json=json.dumps(info))
        res = self.calls.service(
            self.begin_c, req, 'telemetry begin_episode', self.calls.t.quick_s
        )
        if res.error_code != BeginEpisode.Response.OK:
            bad = res.error_code == BeginEpisode.Response.CANNOT_WRITE
            raise TelemetryRefused(seed, f'telemetry: {res.error_msg}', bad)
        if res.run_dir and seed == self.seed:
            self.say(f'telemetry writes {res.run_dir}')

    def _close(self, result: EpisodeResult) -> None:
        """Have telemetry write the episode line and confirm the event count (mismatch = error)."""
        if self.telemetry == 'off' or self.stopping():
            return  # on Ctrl-C / SIGTERM the telemetry node closes its open episode itself
        req = EndEpisode.Request(
            seed=result.seed,
            result_json=json.dumps(result.to_dict()),
            expected_events=self.sink.count,
        )
        try:
            res = self.calls.service(
                self.end_c, req, 'telemetry end_episode', self.calls.t.quick_s
            )
        except EpisodeAborted as exc:
            raise EpisodeAborted(
                f'telemetry could not close seed {result.seed}: {exc.reason}'
            ) from None
        if res.error_code != EndEpisode.Response.OK:
            raise EpisodeAborted(
                f'telemetry: {res.error_msg} (wrote {res.events_written}, '
                f'published {self.sink.count})'
            )


def main(args: list[str] | None = None) -> None:
    init(args)  # Ctrl-C stops the node like SIGTERM: no KeyboardInterrupt
    node = None
    worker = None
    code = 0
    try:
        node = start(EpisodeDirectorNode)
        executor = start(lambda: MultiThreadedExecutor(num_threads=4))
        executor.add_node(node)
        worker = threading.Thread(target=node.run, daemon=True)
        worker.start()
        # The executor delivers service answers and action results while the worker waits.
        spin_until_shutdown(executor)
        worker.join(timeout=5.0)
        code = node.exit_code
    except (KeyboardInterrupt, ExternalShutdownException):
        # a stop from outside, or the worker's own shutdown (its exit code then stands)
        stopped = node is None or not node.finished
        if node is not None and stopped:
            node.calls.stop()  # the worker's pending call raises EpisodeAborted
        if worker is not None:
            worker.join(timeout=5.0)
        code = 130 if stopped or node is None else node.exit_code
    finally:
        if node is not None:
            destroy_within(node, code=code)
        rclpy.try_shutdown()
    exit_now(code)  # the worker's code; skip the interpreter's finalization (nodes/spin.py)


if __name__ == '__main__':
    main()
