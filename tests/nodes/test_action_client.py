"""The action client records a request before another thread can handle its response."""

from __future__ import annotations

import threading

import pytest
from control_msgs.action import FollowJointTrajectory
from palletizer.nodes.action_client import OrderedActionClient
from rclpy.action import ActionClient


class _FastServer:
    """Stands in for the rcl action client handle: the answer to a goal request is taken and
    handled by another thread at once, before send_goal_request has even returned."""

    def __init__(self, client: ActionClient) -> None:
        self.client = client
        self.handler: threading.Thread | None = None

    def send_goal_request(self, request) -> int:
        response = FollowJointTrajectory.Impl.SendGoalService.Response()
        response.accepted = True

        def handle() -> None:
            coro = self.client.execute({'goal': (7, response)})
            with pytest.raises(StopIteration):
                coro.send(None)

        self.handler = threading.Thread(target=handle)
        self.handler.start()
        self.handler.join(0.2)  # an unlocked client has handled (and dropped) it by now
        return 7


def _client(cls: type[ActionClient]) -> tuple[ActionClient, _FastServer]:
    """The client without a node (no DDS participant): only what a goal round trip touches."""
    client = cls.__new__(cls)
    if cls is OrderedActionClient:
        client._order = threading.Lock()
    client._action_type = FollowJointTrajectory
    client._action_name = 'fjt'
    client._futures = []
    client._goal_handles = {}
    client._pending_goal_requests = {}
    client._goal_sequence_number_to_goal_id = {}
    client._feedback_callbacks = {}
    client._logger = type('Quiet', (), {'warning': lambda self, msg: None})()
    server = _FastServer(client)
    client._client_handle = server
    return client, server


@pytest.mark.parametrize('cls', [OrderedActionClient, ActionClient])
def test_a_goal_answered_at_once_is_acknowledged(cls):
    client, server = _client(cls)
    future = client.send_goal_async(FollowJointTrajectory.Goal())
    server.handler.join(2.0)
    assert not server.handler.is_alive()
    if cls is OrderedActionClient:
        assert future.done() and future.result().accepted
    else:  # rclpy 7.1's own client drops the answer: the race this class closes
        assert not future.done()
