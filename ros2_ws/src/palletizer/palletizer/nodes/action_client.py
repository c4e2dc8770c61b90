"""An rclpy ActionClient whose requests cannot lose their responses to another thread."""

from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.task import Future

__all__ = ['OrderedActionClient']


class OrderedActionClient(ActionClient):
    """ActionClient that registers each request before another thread can handle its response.

    rclpy 7.1's ActionClient sends a goal (result, cancel) request and only then records its
    sequence number; a MultiThreadedExecutor thread that takes the response in between drops
    it ("Ignoring unexpected goal response") and the goal is never acknowledged. A graph test
    saw it: the cell accepted a pick goal within microseconds and the executor waited out its
    10 s server timeout. Here sending and recording hold one lock, and handling a response
    first waits for a send in progress. (rclpy's service Client already locks this way.)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._order = threading.Lock()
        super().__init__(*args, **kwargs)

    def send_goal_async(
        self, goal: Any, feedback_callback: Any = None, goal_uuid: Any = None
    ) -> Future:
        with self._order:
            future: Future = super().send_goal_async(goal, feedback_callback, goal_uuid)
            return future

    def _cancel_goal_async(self, goal_handle: ClientGoalHandle) -> Future:
        with self._order:
            future: Future = super()._cancel_goal_async(goal_handle)
            return future

    def _get_result_async(self, goal_handle: ClientGoalHandle) -> Future:
        with self._order:
            future: Future = super()._get_result_async(goal_handle)
            return future

    async def execute(self, taken_data: Any) -> None:
        with self._order:
            pass  # a request whose response this is has been recorded by now
        await super().execute(taken_data)
