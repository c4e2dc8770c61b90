"""The episode director's calls on the telemetry node: each episode opened and closed on disk.

The director has telemetry open an episode before the cell resets (a refusal stops the run:
TelemetryRefused) and close it after, confirming the count of events it published (a mismatch
or a failed close aborts the run: EpisodeAborted).
"""

from __future__ import annotations

import json
from collections.abc import Callable

from palletizer_msgs.srv import BeginEpisode, EndEpisode
from rclpy.node import Node

from palletizer.core.contracts import EpisodeResult
from palletizer.core.errors import PalletizerError
from palletizer.core.ports import EpisodeAborted
from palletizer.nodes.calls import Calls
from palletizer.nodes.director_params import DirectorParams

__all__ = ['EpisodeRecords', 'TelemetryRefused']


class TelemetryRefused(PalletizerError):
    """Telemetry cannot record the next episode: the run stops before the cell resets."""

    def __init__(self, seed: int, reason: str, bad_input: bool) -> None:
        super().__init__(reason)
        self.seed, self.reason, self.bad_input = seed, reason, bad_input


class EpisodeRecords:
    """BeginEpisode and EndEpisode on /telemetry for the run `run_id` of `params`' level and
    task (`n_objects` cartons); nothing with telemetry:=off."""

    def __init__(
        self,
        node: Node,
        calls: Calls,
        params: DirectorParams,
        run_id: str,
        task: str,
        n_objects: int,
        say: Callable[[str], None],
    ) -> None:
        self.calls = calls
        self.params = params
        self.run_id = run_id
        self.task = task
        self.n_objects = n_objects
        self.say = say
        self.begin_c = node.create_client(BeginEpisode, '/telemetry/begin_episode')
        self.end_c = node.create_client(EndEpisode, '/telemetry/end_episode')

    def open(self, seed: int, oracle: bool, sha: str) -> None:
        """Have telemetry open the episode before the cell resets; a refusal stops the run.

        The run facts go with it, so that even an episode aborted before its first event has
        its level, task and oracle flag on disk.
        """
        p = self.params
        if p.telemetry == 'off':
            return
        info = {
            'level': p.level,
            'task': self.task,
            'oracle': oracle,
            'git_sha': sha,
            # A real cell's line does not say how many cartons come: counted as they come.
            'n_objects': None if p.real else self.n_objects,
        }
        req = BeginEpisode.Request(seed=seed, run_id=self.run_id, info_json=json.dumps(info))
        res = self.calls.service(
            self.begin_c, req, 'telemetry begin_episode', self.calls.t.quick_s
        )
        if res.error_code != BeginEpisode.Response.OK:
            bad = res.error_code == BeginEpisode.Response.CANNOT_WRITE
            raise TelemetryRefused(seed, f'telemetry: {res.error_msg}', bad)
        if res.run_dir and seed == p.seed:
            self.say(f'telemetry writes {res.run_dir}')

    def close(self, result: EpisodeResult, published: int, stopping: bool) -> None:
        """Have telemetry write the episode line and confirm the `published` event count
        (mismatch = error); nothing while `stopping`."""
        if self.params.telemetry == 'off' or stopping:
            return  # on Ctrl-C / SIGTERM the telemetry node closes its open episode itself
        req = EndEpisode.Request(
            seed=result.seed,
            result_json=json.dumps(result.to_dict()),
            expected_events=published,
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
                f'telemetry: {res.error_msg} (wrote {res.events_written}, published {published})'
            )
