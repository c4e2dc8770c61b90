"""The director's calls to the other nodes: one service or action call with a timeout, a
server that left the graph, and a stop asked for, each turned into an EpisodeAborted that names
the node (the helper every episode port in director_ports.py, director_motion.py,
director_sink.py and sensing_ports.py shares).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rclpy.client import Client
from rclpy.node import Node
from rclpy.task import Future

from palletizer.core.errors import PalletizerError
from palletizer.core.ports import STOP_REASON_ENV, EpisodeAborted
from palletizer.nodes.action_client import OrderedActionClient

__all__ = ['Calls', 'Timeouts']


@dataclass(frozen=True)
class Timeouts:
    """How long [s, wall] the director waits for a live node's answer, sized to the work asked.

    A dead node is noticed within the DDS lease instead (Calls). `speed` is the motion speed
    (0 = fast-forward): motion and simulated time run at 1/speed of real time, so the waits
    that contain them scale with it.
    """

    speed: float = 0.0
    # Bookkeeping answered from memory or one short computation (tare, weigh, telemetry,
    # parameters, ground truth, detection, fusion, one camera render): milliseconds when
    # healthy; 30 s leaves room for two loaded cores.
    quick_s: float = 30.0
    reset_s: float = 60.0  # the cell rebuilds its MuJoCo model and renderers: ~2-5 s
    plan_s: float = 60.0  # beam search on a full pallet: ~1-3 s on two cores
    # One pick or place: 6-8 s of motion at speed 1 (scripts/bench motion: 5.9 s median),
    # plus planning; 60 s of motion covers the longest reach-fitted moves.
    motion_s: float = 60.0
    # The conveyor or truck bringing the next carton: up to ~20 s of simulated time.
    present_s: float = 60.0
    # The stability trials: 15 jolts of ~2.9 s, 2 beams of ~2.4 s and EUMOS, ~50 s simulated.
    stability_s: float = 120.0

    def scaled(self, sim_s: float) -> float:
        """A wait that contains sim_s [s] of simulated time: 30 s plus that time at speed."""
        return 30.0 + (sim_s / self.speed if self.speed > 0 else sim_s)

    @property
    def motion(self) -> float:
        return self.scaled(self.motion_s)

    @property
    def present(self) -> float:
        return self.scaled(self.present_s)


def _node_of(name: str) -> str:
    """The node behind a service or action name: '/planner/plan' -> 'planner'."""
    return name.strip('/').split('/')[0] or name


class _ServerLost(PalletizerError):
    """The server vanished from the graph while a request was in flight."""


class Calls:
    """Blocking service and action calls from a worker thread while the executor spins.

    Every wait is bounded twice: by a timeout sized to the call's work (a live server that does
    not answer), and by the server's presence in the graph, checked every LIVENESS_S. A node
    that dies leaves the graph within the DDS participant lease (configs/fastdds.xml, set by the
    launcher). Then a `repeatable` request (read-only, or keyed so that a repeat does no harm)
    is sent again once the node is back, respawned; any other request, or a node that does not
    come back within `respawn_s`, aborts the episode with a reason that names the node.
    """

    # After discovery the server's reply writer can lag the client's reply reader: a request
    # sent at once may be answered into the void ("failed to send response"). A short pause
    # before the first call on each client closes that window.
    FIRST_CALL_PAUSE_S = 0.5
    LIVENESS_S = 0.5  # how often a wait checks that its server is still in the graph [s]

    def __init__(
        self,
        node: Node,
        abort: threading.Event,
        timeouts: Timeouts | None = None,
        discover_s: float = 30.0,
        respawn_s: float = 8.0,
    ) -> None:
        self.node = node
        self.abort = abort
        self.t = timeouts or Timeouts()
        # A node's first appearance: eight processes starting on two shared cores.
        self.discover_s = discover_s
        # A respawned node's return: the launcher's 1 s delay plus the node's start (imports,
        # config, the reach table), 2-4 s on two cores.
        self.respawn_s = respawn_s
        self.stop_reason = ''  # why the run is being stopped, when the launcher said
        self._ready: set[int] = set()
        self._known: dict[int, frozenset[bytes]] = {}  # each client's servers at its last answer

    def stop(self) -> None:
        """Abort the call in progress; the reason is the launcher's, when it wrote one."""
        path = os.environ.get(STOP_REASON_ENV, '')
        if path:
            try:
                self.stop_reason = Path(path).read_text(encoding='utf-8').strip()
            except OSError:
                pass  # no reason written: a signal from elsewhere
        self.abort.set()

    def _wait(
        self,
        fut: Future,
        what: str,
        timeout_s: float,
        alive: Callable[[], bool] | None = None,
        limit_s: float | None = None,
        budget_s: float | None = None,
    ) -> Any:
        """The future's result; None when `limit_s` passed without an answer.

        Raises _ServerLost when `alive()` turns false, EpisodeAborted on a stop or after
        timeout_s [s].
        """
        done = threading.Event()
        fut.add_done_callback(lambda _f: done.set())
        t0 = time.monotonic()
        checked = t0
        while not done.wait(0.1):
            now = time.monotonic()
            if self.abort.is_set():
                why = f' ({self.stop_reason})' if self.stop_reason else ''
                raise EpisodeAborted(f'stopped while waiting for {what}{why}')
            if alive is not None and now - checked >= self.LIVENESS_S:
                checked = now
                if not alive():
                    raise _ServerLost(what)
            if limit_s is not None and now - t0 > limit_s:
                return None
            if now - t0 > timeout_s:
                said = timeout_s if budget_s is None else budget_s  # the whole call's budget
                raise EpisodeAborted(f'{what} did not answer within {said:g} s')
        if fut.exception() is not None:
            raise EpisodeAborted(f'{what} failed: {fut.exception()}')
        return fut.result()

    def _servers(self, client: Client) -> frozenset[bytes]:
        """The GIDs of a service's servers (their reply writers): a restarted node has new ones,
        even when it is back before the old one's lease has expired."""
        infos = self.node.get_publishers_info_by_topic(f'rr{client.srv_name}Reply', no_mangle=True)
        return frozenset(bytes(i.endpoint_gid) for i in infos)

    def _discover(
        self,
        client: Client | OrderedActionClient,
        ready: Callable[[float], bool],
        name: str,
        what: str,
    ) -> None:
        if id(client) in self._ready:
            return
        if not ready(self.discover_s):
            raise EpisodeAborted(
                f'{what}: {name} is not available after {self.discover_s:.0f} s '
                f'(node {_node_of(name)} not running?)'
            )
        time.sleep(self.FIRST_CALL_PAUSE_S)
        self._ready.add(id(client))

    @staticmethod
    def _gone(name: str, what: str) -> EpisodeAborted:
        return EpisodeAborted(
            f'{what}: node {_node_of(name)} left the graph (died or restarted) while handling '
            'a request that cannot be repeated'
        )

    def _back(
        self,
        ready: Callable[[float], bool],
        name: str,
        what: str,
        repeatable: bool,
        first: bool = False,
    ) -> None:
        """After a lost server: return when it is back and the request may be sent (again)."""
        node = _node_of(name)
        if not repeatable:
            raise self._gone(name, what)
        if not ready(self.respawn_s):
            raise EpisodeAborted(
                f'{what}: node {node} left the graph (died) and did not come back within '
                f'{self.respawn_s:.0f} s'
            )
        time.sleep(self.FIRST_CALL_PAUSE_S)
        sent = 'request sent to the new one' if first else 'request sent again'
        print(f'  {what}: node {node} came back (respawned); {sent}', flush=True)

    def service(
        self,
        client: Client,
        request: Any,
        what: str,
        timeout_s: float,
        repeatable: bool = False,
        retry_s: float | None = None,
        again: Callable[[], Any] | None = None,
    ) -> Any:
        """Call and wait up to timeout_s [s] of a live server.

        `repeatable`: the request may be sent again (read-only, or keyed so a repeat does no
        harm): after the server came back from a restart, and with `retry_s` every retry_s
        seconds while unanswered (an answer lost right after discovery). `again` builds the
        request to send after a restart instead (e.g. after holding the arm still again, so a
        restarted gauge sees samples of its own).
        """

        def ready(t: float) -> bool:
            return bool(client.wait_for_service(timeout_sec=t))

        self._discover(client, ready, client.srv_name, what)
        servers = self._servers(client)
        known = self._known.get(id(client))
        if known is not None and servers != known:
            # The server was replaced since the last call (a restart faster than its lease):
            # give the new one's reply writer time to match, and rebuild the request for it.
            self._back(ready, client.srv_name, what, repeatable=True, first=True)
            if again is not None:
                request = again()
            servers = self._servers(client)
        t0 = time.monotonic()
        while True:
            left = timeout_s - (time.monotonic() - t0)

            def alive(sent: frozenset[bytes] = servers) -> bool:
                # Gone, or replaced while the request was out: its answer will not come.
                now = self._servers(client)
                return bool(now) and now <= sent and client.service_is_ready()

            try:
                res = self._wait(
                    client.call_async(request),
                    what,
                    max(left, 0.1),
                    alive=alive,
                    limit_s=retry_s if repeatable else None,
                    budget_s=timeout_s,
                )
            except _ServerLost:
                self._back(ready, client.srv_name, what, repeatable)
                if again is not None:
                    request = again()
                servers = self._servers(client)
                continue
            if res is not None:
                self._known[id(client)] = servers
                return res
            if time.monotonic() - t0 > timeout_s:
                raise EpisodeAborted(f'{what} did not answer within {timeout_s:g} s')

    def action(
        self,
        client: OrderedActionClient,
        goal: Any,
        what: str,
        timeout_s: float,
        feedback: Callable[[Any], None] | None = None,
    ) -> Any:
        """Send a goal and wait for its result up to timeout_s [s]; goals are never repeated
        (the arm may have moved), so a server that leaves the graph aborts the episode."""

        def ready(t: float) -> bool:
            return bool(client.wait_for_server(timeout_sec=t))

        name = client._action_name
        self._discover(client, ready, name, what)
        try:
            handle = self._wait(
                client.send_goal_async(goal, feedback_callback=feedback),
                what,
                timeout_s,
                alive=client.server_is_ready,
            )
            if not handle.accepted:
                raise EpisodeAborted(f'{what}: goal rejected')
            return self._wait(
                handle.get_result_async(), what, timeout_s, alive=client.server_is_ready
            ).result
        except _ServerLost:
            raise self._gone(name, what) from None
