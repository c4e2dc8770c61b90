"""A node's spin ends as a stop when a signal shuts its context down mid-spin, even when rcl
reports that as an error while building the wait set; the same error with the context up is
raised as it is."""

from __future__ import annotations

import pytest
from palletizer.nodes.spin import spin_until_shutdown
from rclpy.executors import ExternalShutdownException

WAIT_SET = 'failed to initialize wait set: the given context is not valid'


class _Context:
    def __init__(self) -> None:
        self.up = True

    def ok(self) -> bool:
        return self.up


class _Executor:
    """Spins `turns` times, then fails the way rcl does: with the context shut down by a signal
    (`signalled`) or with it still up."""

    def __init__(self, turns: int, signalled: bool) -> None:
        self.context = _Context()
        self.turns = turns
        self.signalled = signalled
        self.spun = 0

    def spin_once(self, timeout_sec: float | None = None) -> None:
        self.spun += 1
        if self.spun > self.turns:
            if self.signalled:
                self.context.up = False
            raise RuntimeError(WAIT_SET)

    def spin(self) -> None:
        while self.context.ok():
            self.spin_once()


@pytest.mark.parametrize('poll_s', [None, 0.2])
def test_the_wait_set_race_on_a_signal_is_a_stop(poll_s):
    ex = _Executor(turns=3, signalled=True)
    with pytest.raises(ExternalShutdownException, match='context shut down') as err:
        spin_until_shutdown(ex, poll_s=poll_s)  # type: ignore[arg-type]
    assert isinstance(err.value.__cause__, RuntimeError) and ex.spun == 4


@pytest.mark.parametrize('poll_s', [None, 0.2])
def test_the_same_error_with_the_context_up_propagates(poll_s):
    ex = _Executor(turns=2, signalled=False)
    with pytest.raises(RuntimeError, match='wait set'):
        spin_until_shutdown(ex, poll_s=poll_s)  # type: ignore[arg-type]


def test_a_polled_spin_returns_once_the_context_is_down():
    ex = _Executor(turns=10**9, signalled=False)

    def spin_once(timeout_sec: float | None = None) -> None:
        ex.spun += 1
        if ex.spun == 5:
            ex.context.up = False

    ex.spin_once = spin_once  # type: ignore[method-assign]
    spin_until_shutdown(ex, poll_s=0.2)  # type: ignore[arg-type]
    assert ex.spun == 5
