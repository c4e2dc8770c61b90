"""Episode director node: runs the episode loop of core/episode.py over the node graph.

It asks and does not compute: the cell presents, depth_fusion perceives, the executor picks and
places, the wrist gauge weighs, the planner plans, the referee measures. It publishes the episode
events, placements and pallet states, and has the telemetry node confirm what it wrote. Its parts
beside it: the parameters (director_params.py), the telemetry calls (director_records.py), the
start-up lookups (director_graph.py) and the episode ports (director_ports.py, director_motion.py,
director_sink.py, sensing_ports.py, line_ports.py).
"""

from __future__ import annotations

import dataclasses
import threading
import time

import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

from palletizer.core.contracts import EpisodeResult, PalletGeometry
from palletizer.core.episode import EpisodeSettings, run_episode
from palletizer.core.oracle import oracle_flag, reads_truth
from palletizer.core.placement_check import PlacementCheck
from palletizer.core.ports import EpisodeAborted
from palletizer.core.vocab import GaugeMode, PerceptionMode
from palletizer.nodes.calls import Calls, Timeouts
from palletizer.nodes.director_graph import GraphLookups
from palletizer.nodes.director_motion import RosExecutor
from palletizer.nodes.director_params import declare_params
from palletizer.nodes.director_ports import RosCell, RosPlanner, RosReferee
from palletizer.nodes.director_records import EpisodeRecords, TelemetryRefused
from palletizer.nodes.director_sink import RosSink
from palletizer.nodes.line_ports import RosLine
from palletizer.nodes.sensing_ports import RosGauge, RosPerception
from palletizer.nodes.spin import destroy_within, exit_now, init, spin_until_shutdown, start
from palletizer.version import git_sha

__all__ = ['MODE_PARAMETERS', 'EpisodeDirectorNode', 'main', 'summary_line']

# Exit codes (docs/running.md "Exit codes"); an interrupted run exits 130 (SIGINT).
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


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
        self.params, cfg = declare_params(self)
        p = self.params
        self.settings = EpisodeSettings.from_config(cfg.cell, cfg.planner.buffer)
        self.catalogue = cfg.catalogue
        self.task = cfg.level(p.level).source
        self.n_objects = cfg.level(p.level).n  # the cartons the cell presents
        self.abort = threading.Event()
        self.calls = Calls(self, self.abort, Timeouts(speed=p.speed))
        self.group = ReentrantCallbackGroup()
        g = cfg.perception.gauge
        self.gauge = RosGauge(
            self, self.calls, p.hold, on_lift=g.weigh_on_lift, on_move=g.zero_on_move
        )
        self.cell: RosCell | RosLine
        if p.real:
            # How long a carton may take to come: the conveyor's own jam time, sim seconds.
            self.cell = RosLine(
                self,
                self.calls,
                self.gauge,
                cfg.cell.hardware.line,
                set_io_service=p.set_io,
                io_states_topic=p.io_states,
                arrive_s=cfg.cell.conveyor.timeout_s,
                stopping=self.stopping,
            )
        else:
            self.cell = RosCell(self, self.calls, self.gauge)
        self.pallet = PalletGeometry.from_config(cfg.cell.pallet)
        self.gauge.cell = self.cell
        self.planner = RosPlanner(self, self.calls, p.planner_kind)
        self.motion = RosExecutor(
            self,
            self.calls,
            stamp=lambda: self.cell.stamp,
            refresh=lambda: self.cell.hold(0.0),  # a cell call that only reads the time
            clock=lambda: self.cell.sim_time(),
        )
        self.referee: RosReferee | PlacementCheck | None = (
            None if p.real else RosReferee(self, self.calls)
        )
        self.run_id = time.strftime('%Y%m%d-%H%M%S')
        # Photos only when telemetry writes them; the park before each is the executor's and
        # happens either way, so the episode is the same with and without telemetry.
        views = (
            tuple(v.value for v in cfg.telemetry.snapshots.views)
            if p.telemetry != 'off' and not p.real  # photos: a capture on request
            else ()
        )
        self.sink = RosSink(self, self.run_id, self.say, self.calls, views)
        self.records = EpisodeRecords(
            self, self.calls, self.params, self.run_id, self.task, self.n_objects, self.say
        )
        self.results: list[EpisodeResult] = []
        self.graph = GraphLookups(self, self.calls)
        self.exit_code = 0
        self.finished = False  # set once run() is over, before it shuts the graph down

    def say(self, line: str) -> None:
        print(line, flush=True)

    def run(self) -> None:
        """All episodes, in a worker thread while the executor spins."""
        p = self.params
        try:
            missing = self.graph.driver_missing(p, self.stopping)
            if missing:
                self.say(f'run stopped: {missing}')
                self.exit_code = EXIT_FAILED
                return
            modes = [self.graph.param_of(node, name) or '?' for node, name, _ in MODE_PARAMETERS]
            map_mode, detector_mode, gauge_mode = modes
            kind = self.graph.param_of('planner', 'kind') or p.planner_kind
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
            if p.real:  # no ground truth: the palletizer checks its placements itself
                self.referee = PlacementCheck(perception, self.pallet)
            referee = self.referee
            assert referee is not None
            motion = 'fast-forward' if p.speed == 0 else f'interpolated x{p.speed:g}'
            self.say(
                f'palletizer · level {p.level} ({self.task}) · planner {kind} · map '
                f'{map_mode} · detector {detector_mode} · gauge {gauge_mode} · motion {motion} · '
                f'telemetry {p.telemetry} · cell interfaces {p.interfaces} · '
                f'oracle {str(oracle).lower()}'
            )
            sha = git_sha()
            for k in range(p.episodes):
                seed = p.seed + k
                self.records.open(seed, oracle, sha)
                self.sink.begin(seed)
                self.planner.reset()
                # The spec the planner plans this episode to: its line is measured against it.
                spec = self.planner.pallet_spec(self.catalogue.types)
                settings = dataclasses.replace(
                    self.settings, pallet_spec=spec, catalogue=self.catalogue
                )
                perception.reset()
                if isinstance(referee, PlacementCheck):
                    referee.reset()
                self.motion.set_heightmap(None)
                result = run_episode(
                    level=p.level,
                    seed=seed,
                    task=self.task,
                    cell=self.cell,
                    perception=perception,
                    gauge=self.gauge,
                    planner=self.planner,
                    executor=self.motion,
                    referee=referee,
                    sink=self.sink,
                    settings=settings,
                    oracle=oracle,
                    git_sha=sha,
                )
                if p.stability and not result.metrics.get('aborted') and result.n_placed:
                    result = self._stability(result)
                self.records.close(result, self.sink.count, self.stopping())
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
            self.exit_code = EXIT_OK if ok == len(self.results) == p.episodes else EXIT_FAILED
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
