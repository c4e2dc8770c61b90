"""The director's waits: a lost server is noticed, a repeatable request is sent again to the
node that came back, any other request aborts the episode naming the node."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import pytest
from palletizer.core.episode import EpisodeAborted
from palletizer.nodes.director_ports import Calls, Timeouts


class _Service:
    """A service client whose server dies after the first request and comes back (respawned)
    after `back_after` liveness checks; the new server answers every request it receives."""

    srv_name = '/planner/plan'

    def __init__(self, back_after: int = 2, dies: bool = True) -> None:
        self.sent: list[str] = []
        self.futures: list[Future] = []
        self.alive = True
        self.dies = dies
        self.back_after = back_after
        self.checks = 0

    def wait_for_service(self, timeout_sec: float) -> bool:
        self.alive = True  # the respawned node is back
        return True

    def service_is_ready(self) -> bool:
        self.checks += 1
        return self.alive

    def call_async(self, request: str) -> Future:
        fut: Future = Future()
        self.sent.append(request)
        self.futures.append(fut)
        if len(self.sent) == 1 and self.dies:
            self.alive = False  # killed while handling it: never answers
        else:
            threading.Timer(0.05, fut.set_result, args=(f'answer to {request}',)).start()
        return fut


def _calls() -> Calls:
    calls = Calls(node=None, abort=threading.Event(), timeouts=Timeouts(), respawn_s=1.0)
    calls.FIRST_CALL_PAUSE_S = 0.0
    calls.LIVENESS_S = 0.05
    return calls


def test_a_repeatable_request_is_sent_again_to_the_node_that_came_back():
    client = _Service()
    res = _calls().service(client, 'plan #1', 'planner', timeout_s=5.0, repeatable=True)
    assert res == 'answer to plan #1' and client.sent == ['plan #1', 'plan #1']


def test_a_request_rebuilt_for_the_restarted_node_is_the_one_sent_again():
    client = _Service()
    res = _calls().service(
        client, 'weigh @1.0', 'wrist gauge weigh', 5.0, repeatable=True, again=lambda: 'weigh @1.5'
    )
    assert res == 'answer to weigh @1.5' and client.sent == ['weigh @1.0', 'weigh @1.5']


def test_a_request_that_cannot_be_repeated_aborts_naming_the_node():
    client = _Service()
    with pytest.raises(EpisodeAborted, match='planner: node planner left the graph'):
        _calls().service(client, 'plan #1', 'planner', timeout_s=5.0)
    assert client.sent == ['plan #1']


def test_a_live_server_that_does_not_answer_times_out_after_the_sized_wait():
    client = _Service(dies=False)
    client.call_async = lambda request: Future()  # alive, never answers
    with pytest.raises(EpisodeAborted, match='planner did not answer within 0.3 s'):
        _calls().service(client, 'plan #1', 'planner', timeout_s=0.3)


def test_timeouts_scale_with_the_simulated_time_they_contain():
    assert Timeouts(speed=0.0).motion == pytest.approx(90.0)
    assert Timeouts(speed=0.5).motion == pytest.approx(150.0)
    assert Timeouts(speed=1.0).scaled(2.0) == pytest.approx(32.0)
