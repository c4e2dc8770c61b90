"""The director's perception port: an episode's first fusion asks depth_fusion to forget what
earlier fusions saw (the memory of cells out of sight belongs to one stack)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from palletizer.core.contracts import HeightMap
from palletizer.core.ports import EpisodeAborted
from palletizer.nodes.convert import heightmap_to_msg
from palletizer.nodes.sensing_ports import RosPerception
from palletizer_msgs.srv import FuseHeightMap


class _Node:
    def create_client(self, *_args, **_kwargs) -> object:
        return object()

    def say(self, _msg: str) -> None:
        pass


class _Calls:
    """Answers every fusion request from a queue of error codes, recording the requests."""

    t = SimpleNamespace(quick_s=1.0)

    def __init__(self, codes: list[int]) -> None:
        self.codes = codes
        self.sent: list[FuseHeightMap.Request] = []

    def service(self, _client, request, _what, _timeout, **_kw):
        self.sent.append(request)
        res = FuseHeightMap.Response()
        res.error_code = self.codes.pop(0)
        res.error_msg = 'no frames' if res.error_code else ''
        res.heightmap = heightmap_to_msg(HeightMap.flat())
        return res


def test_the_first_fusion_of_each_episode_forgets_and_the_others_remember():
    ok, stale = FuseHeightMap.Response.OK, FuseHeightMap.Response.STALE_FRAMES
    calls = _Calls([ok, ok, ok, stale, ok])
    port = RosPerception(_Node(), calls, oracle=False)  # type: ignore[arg-type]
    port.heightmap()
    port.heightmap()
    port.reset()  # the next episode
    port.heightmap()
    port.reset()
    with pytest.raises(EpisodeAborted, match='no frames'):
        port.heightmap()
    port.heightmap()  # the failed fusion forgot nothing: this one must
    assert [r.forget for r in calls.sent] == [True, False, True, True, True]
