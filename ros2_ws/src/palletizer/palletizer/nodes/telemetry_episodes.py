"""The telemetry node's episode services: ~/begin_episode and ~/end_episode.

Begin opens the director's episode in the recorder and binds the node to its run id. End waits
(at most end_wait_s) for the episode's events and photo frames still in flight on other topics,
forgets the photos that never came, writes the episode line and confirms the event count. Each
refusal answers with its own code (docs/interfaces.md §9.3).
"""

from __future__ import annotations

import json
import threading
from typing import Any, Protocol

from palletizer_msgs.srv import BeginEpisode, EndEpisode

from palletizer.core.contracts import EpisodeResult
from palletizer.core.errors import PalletizerError
from palletizer.nodes.telemetry_snapshots import Snapshots
from palletizer.telemetry import Recorder, TelemetryWriteError, check_event_count
from palletizer.telemetry.replica import Replicator

__all__ = ['EpisodeServices', 'TelemetryOwner']

_OFF = 'telemetry mode off: nothing is written'


class TelemetryOwner(Protocol):
    """What the episode services use of the telemetry node (nodes/telemetry.py)."""

    rec: Recorder | None  # None: telemetry off
    replicator: Replicator | None
    lock: threading.Condition  # the subscriptions' and services' lock
    snapshots: Snapshots
    end_wait_s: float

    def get_logger(self) -> Any: ...


class EpisodeServices:
    """Answers ~/begin_episode and ~/end_episode for `node`."""

    def __init__(self, node: TelemetryOwner) -> None:
        self.node = node

    def begin(
        self, req: BeginEpisode.Request, res: BeginEpisode.Response
    ) -> BeginEpisode.Response:
        rec = self.node.rec
        if rec is None:
            res.error_code = BeginEpisode.Response.DISABLED
            res.error_msg = _OFF
            return res
        with self.node.lock:
            outcome, why = rec.begin(req.seed, req.run_id, req.info_json)
            res.run_dir = rec.run_dir
        res.error_code = getattr(BeginEpisode.Response, outcome.name)
        res.error_msg = why
        if why:
            log = self.node.get_logger()
            (log.warning if res.error_code == BeginEpisode.Response.OK else log.error)(why)
        return res

    def end(self, req: EndEpisode.Request, res: EndEpisode.Response) -> EndEpisode.Response:
        node, rec = self.node, self.node.rec
        if rec is None:
            res.error_code = EndEpisode.Response.DISABLED
            res.error_msg = _OFF
            return res
        try:
            result = EpisodeResult.from_dict(json.loads(req.result_json))
        except (PalletizerError, ValueError, TypeError) as exc:
            res.error_code = EndEpisode.Response.INVALID_REQUEST
            res.error_msg = f'result_json: {exc}'
            return res
        with node.lock:
            run = rec.run
            if run is None:
                res.error_code = EndEpisode.Response.WRITE_FAILED
                res.error_msg = f'no run folder: {rec.error}'
                return res
            # Events and snapshot frames travel on other topics than this request and may still
            # be in flight.
            node.lock.wait_for(
                lambda: (
                    run.open_seed == req.seed
                    and (run.open_events or 0) >= req.expected_events
                    and not node.snapshots.waiting(req.seed)
                ),
                node.end_wait_s,
            )
            node.snapshots.forget(req.seed)
            if run.open_seed != req.seed or result.seed != req.seed:
                res.error_code = EndEpisode.Response.NO_OPEN_EPISODE
                res.error_msg = (
                    f'seed {req.seed} (result seed {result.seed}) is not the open episode '
                    f'({run.open_seed})'
                )
                return res
            try:
                res.events_written = run.open_events or 0
                res.events_written = run.end(result)
                rec.checkpoint()
                if node.replicator is not None:
                    node.replicator.wake()  # ship the episode's final row now, not at a poll
            except TelemetryWriteError as exc:
                res.error_code = EndEpisode.Response.WRITE_FAILED
                res.error_msg = f'episode seed {req.seed} not recorded: {exc}'
                node.get_logger().error(res.error_msg)
                return res
            except PalletizerError as exc:
                res.error_code = EndEpisode.Response.INVALID_REQUEST
                res.error_msg = str(exc)
                return res
        try:
            check_event_count(req.seed, res.events_written, req.expected_events)
        except PalletizerError as exc:
            res.error_code = EndEpisode.Response.COUNT_MISMATCH
            res.error_msg = str(exc)
            node.get_logger().error(res.error_msg)
            return res
        res.error_code = EndEpisode.Response.OK
        return res
