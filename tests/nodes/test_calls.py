"""The director's waits: a lost server is noticed, a repeatable request is sent again to the
node that came back, any other request aborts the episode naming the node."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from palletizer.core.ports import EpisodeAborted
from palletizer.nodes.calls import Calls, Timeouts


class _Service:
    """A service client whose server dies after the first request and comes back (respawned)
    when waited for; the new server answers every request it receives."""

    srv_name = '/planner/plan'

    def __init__(self, dies: bool = True) -> None:
        self.sent: list[str] = []
        self.futures: list[Future] = []
        self.alive = True
        self.dies = dies
        self.incarnation = 1  # a restarted server has a new reply writer (GID)
        self.checks = 0

    def wait_for_service(self, timeout_sec: float) -> bool:
        if not self.alive:
            self.alive, self.incarnation = True, self.incarnation + 1  # respawned
        return True

    def restart(self) -> None:
        """Replaced between two calls, faster than the lease: never seen as gone."""
        self.incarnation += 1

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


class _Node:
    def __init__(self, client: _Service) -> None:
        self.client = client

    def get_publishers_info_by_topic(self, topic: str, no_mangle: bool) -> list:
        assert no_mangle and topic == f'rr{self.client.srv_name}Reply'
        gid = SimpleNamespace(endpoint_gid=[self.client.incarnation] * 16)
        return [gid] if self.client.alive else []


def _calls(client: _Service) -> Calls:
    calls = Calls(_Node(client), abort=threading.Event(), timeouts=Timeouts(), respawn_s=1.0)
    calls.FIRST_CALL_PAUSE_S = 0.0
    calls.LIVENESS_S = 0.05
    return calls


def test_a_repeatable_request_is_sent_again_to_the_node_that_came_back():
    client = _Service()
    res = _calls(client).service(client, 'plan #1', 'planner', timeout_s=5.0, repeatable=True)
    assert res == 'answer to plan #1' and client.sent == ['plan #1', 'plan #1']


def test_a_request_rebuilt_for_the_restarted_node_is_the_one_sent_again():
    client = _Service()
    res = _calls(client).service(
        client, 'weigh @1.0', 'wrist gauge weigh', 5.0, repeatable=True, again=lambda: 'weigh @1.5'
    )
    assert res == 'answer to weigh @1.5' and client.sent == ['weigh @1.0', 'weigh @1.5']


def test_a_request_that_cannot_be_repeated_aborts_naming_the_node():
    client = _Service()
    with pytest.raises(EpisodeAborted, match='planner: node planner left the graph'):
        _calls(client).service(client, 'plan #1', 'planner', timeout_s=5.0)
    assert client.sent == ['plan #1']


def test_a_live_server_that_does_not_answer_times_out_after_the_sized_wait():
    client = _Service(dies=False)
    client.call_async = lambda request: Future()  # alive, never answers
    with pytest.raises(EpisodeAborted, match='planner did not answer within 0.3 s'):
        _calls(client).service(client, 'plan #1', 'planner', timeout_s=0.3)


def test_timeouts_scale_with_the_simulated_time_they_contain():
    assert Timeouts(speed=0.0).motion == pytest.approx(90.0)
    assert Timeouts(speed=0.5).motion == pytest.approx(150.0)
    assert Timeouts(speed=1.0).scaled(2.0) == pytest.approx(32.0)


def test_a_server_replaced_between_two_calls_gets_the_rebuilt_request():
    # A restart faster than the DDS lease is never seen as a gone server: the new one is
    # recognised by its new reply writer, and the request is rebuilt for it.
    client = _Service(dies=False)
    calls = _calls(client)
    assert (
        calls.service(client, 'weigh @1.0', 'weigh', 5.0, repeatable=True)
        == 'answer to weigh @1.0'
    )
    client.restart()
    res = calls.service(
        client, 'weigh @2.0', 'weigh', 5.0, repeatable=True, again=lambda: 'weigh @2.5'
    )
    assert res == 'answer to weigh @2.5' and client.sent == ['weigh @1.0', 'weigh @2.5']
