"""One bin packed by one policy, item by item, until the first item it cannot place
(docs/bpp.md §10.4)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from palletizer.core.bpp.container import BIN_SIZE, Container, Item, Pose

__all__ = ['Episode', 'Outcome', 'Policy', 'run_episode']


class Policy(Protocol):
    """Chooses where the item in hand goes in the container, or None when it cannot place it."""

    name: str

    def reset(self) -> None: ...

    def choose(self, container: Container, item: Item) -> Pose | None: ...


class Outcome:
    """How an episode ended."""

    no_place = 'no_place'  # the policy found no pose for the item in hand
    refused = 'refused'  # the policy proposed a pose the container refuses
    exhausted = 'exhausted'  # every item of the sequence was placed


@dataclass
class Episode:
    """utilisation in [0, 1]; placed: items placed; decision_ms: each choose() call [ms], the
    last (failed) one included; outcome: an Outcome value."""

    utilisation: float
    placed: int
    outcome: str
    decision_ms: list[float] = field(default_factory=list)


def run_episode(
    policy: Policy, items: Sequence[Item], size: tuple[int, int, int] = BIN_SIZE
) -> Episode:
    """Pack `items` in order into an empty bin; the episode ends at the first item the policy
    cannot place (or places where the container's rule refuses it)."""
    policy.reset()
    box = Container(size)
    times: list[float] = []
    outcome = Outcome.exhausted
    for item in items:
        t = time.perf_counter()
        pose = policy.choose(box, item)
        times.append((time.perf_counter() - t) * 1e3)
        if pose is None:
            outcome = Outcome.no_place
            break
        if not box.check(item, pose).ok:
            outcome = Outcome.refused
            break
        box.place(item, pose)
    return Episode(box.utilisation, len(box.placed), outcome, times)
