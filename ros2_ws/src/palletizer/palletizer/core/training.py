"""Weight training of the score heuristic: the cross-entropy method over its 14 weights, the
loss and ranking of an evaluation, and the quasi-static jolt trials that count fallen boxes.

The method is the reference cell's (docs/training.md): log-space parameters whose softmax, times
the initial weights' sum, gives the weights (so the sum is kept); per iteration candidate 1 is
the current mean and the others are drawn from Normal(mean, std); the elite (the best
ceil(population x elite_fraction) by (loss, missing, fallen)) moves the mean 70 % of the way and
the std half way, floored at 0.05. A weight that starts at 0 is off and stays 0: log space has no
way back from it.

Pure: no I/O, no clock; the random draws come from one generator seeded by the training seed,
so a run is the same whatever evaluates its candidates.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from palletizer.core.errors import InvalidValue
from palletizer.core.params.planning import TERMS, check_weights
from palletizer.core.stability import StackBox, support_hull

__all__ = [
    'JOLT_AXES',
    'JOLT_LEVELS_G',
    'CemState',
    'Score',
    'fallen_under',
    'jolt_falls',
    'loss',
    'n_trials',
    'weight_id',
]

# The jolt levels of configs/stability.yaml [g]; quasi-statically only the two lateral axes can
# tip a box (a vertical acceleration scales every load alike and moves no resultant).
JOLT_LEVELS_G: tuple[float, ...] = (0.05, 0.15, 0.30, 0.50, 0.80)
JOLT_AXES: tuple[str, ...] = ('x', 'y')

MEAN_STEP = 0.7  # mean <- 0.3 mean + 0.7 elite mean
STD_STEP = 0.5  # std <- 0.5 std + 0.5 elite std
STD_FLOOR = 0.05


def n_trials(levels_g: Sequence[float] = JOLT_LEVELS_G, axes: Sequence[str] = JOLT_AXES) -> int:
    """Trials of the stability protocol: one per (level, lateral axis)."""
    return len(levels_g) * len(axes)


def loss(missing: int, fallen: int, trials: int) -> int:
    """n_missing x (n_trials + 1) + total fallen: a box left off costs more than any number of
    falls of that box could."""
    return missing * (trials + 1) + fallen


@dataclass(frozen=True, order=True)
class Score:
    """The ranking key of a candidate (lower is better): (loss, missing, fallen)."""

    loss: int
    missing: int
    fallen: int


def weight_id(weights: Mapping[str, float]) -> str:
    """First 12 hex of the sha256 of the weights' canonical JSON (sorted keys, no spaces)."""
    text = json.dumps({k: float(weights[k]) for k in sorted(weights)}, separators=(',', ':'))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _contacts(
    boxes: Sequence[StackBox], i: int, tol: float
) -> list[tuple[int, tuple[float, ...]]]:
    """Box i's contact patches: (supporter index or -1 for the deck, (x0, x1, y0, y1))."""
    b = boxes[i]
    r = b.rect
    if b.z <= tol:
        return [(-1, r)]
    out: list[tuple[int, tuple[float, ...]]] = []
    for j, s in enumerate(boxes):
        if j != i and abs(s.top - b.z) <= tol:
            q = s.rect
            x0, x1 = max(r[0], q[0]), min(r[1], q[1])
            y0, y1 = max(r[2], q[2]), min(r[3], q[3])
            if x1 > x0 and y1 > y0:
                out.append((j, (x0, x1, y0, y1)))
    return out


def _inside(hull: np.ndarray, x: float, y: float) -> float:
    """Signed distance [m] from (x, y) to the nearest edge line of a CCW hull; > 0 inside."""
    a = hull
    e = np.roll(hull, -1, axis=0) - a
    cross = e[:, 0] * (y - a[:, 1]) - e[:, 1] * (x - a[:, 0])
    return float(np.min(cross / np.hypot(e[:, 0], e[:, 1])))


def fallen_under(
    boxes: Sequence[StackBox], accel_g: tuple[float, float], contact_tol: float = 0.004
) -> np.ndarray:
    """(N,) bool: the boxes that fall under a steady lateral acceleration accel_g (x, y) [g].

    validate_stack's load path with the inertial force added: top-down, a box carries its own
    weight at its CoG and the loads of the boxes on it at their contact centroids, each with a
    lateral force accel x its mass; the resultant meets the box's base plane shifted by accel x
    the height it acts at; the box tips when that point leaves the convex hull of its contact
    patches. A box resting on a box that falls falls too.
    """
    n = len(boxes)
    ax, ay = accel_g
    load = np.zeros((n, 3))  # [kg, kg x m, kg x m] from above, applied at the box's top
    tips = np.zeros(n, dtype=bool)
    patches = [_contacts(boxes, i, contact_tol) for i in range(n)]
    for i in sorted(range(n), key=lambda k: -boxes[k].z):
        b = boxes[i]
        m = b.mass_kg + load[i, 0]
        if m <= 0.0:
            continue
        lever = b.cog[2] - b.z
        rx = (b.mass_kg * (b.cog[0] + ax * lever) + load[i, 1] + ax * b.h * load[i, 0]) / m
        ry = (b.mass_kg * (b.cog[1] + ay * lever) + load[i, 2] + ay * b.h * load[i, 0]) / m
        ps = patches[i]
        hull = support_hull(
            [(0.5 * (r[0] + r[1]), 0.5 * (r[2] + r[3]), r[1] - r[0], r[3] - r[2]) for _, r in ps]
        )
        tips[i] = len(hull) < 3 or _inside(hull, rx, ry) < 0.0
        area = sum((r[1] - r[0]) * (r[3] - r[2]) for _, r in ps)
        for j, r in ps:
            if j >= 0 and area > 0.0:
                share = m * (r[1] - r[0]) * (r[3] - r[2]) / area
                load[j] += (share, share * 0.5 * (r[0] + r[1]), share * 0.5 * (r[2] + r[3]))
    fallen: np.ndarray = tips.copy()
    for i in sorted(range(n), key=lambda k: boxes[k].z):
        if not fallen[i]:
            fallen[i] = any(j >= 0 and fallen[j] for j, _ in patches[i])
    return fallen


def jolt_falls(
    boxes: Sequence[StackBox],
    levels_g: Sequence[float] = JOLT_LEVELS_G,
    axes: Sequence[str] = JOLT_AXES,
) -> list[dict[str, Any]]:
    """Each trial from the same stack (restored between trials, as the reference does): a jolt
    pushes both ways along its axis, so a box falls in it when it falls under +a or -a."""
    out: list[dict[str, Any]] = []
    for g in levels_g:
        for axis in axes:
            if axis not in JOLT_AXES:
                raise InvalidValue(f'jolt axis {axis!r}; expected one of {", ".join(JOLT_AXES)}')
            vec = (g, 0.0) if axis == 'x' else (0.0, g)
            both = fallen_under(boxes, vec) | fallen_under(boxes, (-vec[0], -vec[1]))
            out.append(
                {
                    'level_g': g,
                    'axis': axis,
                    'fallen': int(both.sum()),
                    'fallen_index': [int(k) for k in np.flatnonzero(both)],
                }
            )
    return out


@dataclass
class CemState:
    """The search: mean and std of the free logits (the terms whose initial weight is > 0).

    weights(logits) = total x softmax(logits) over the free terms, 0 for the others, where
    total is the initial weights' sum.
    """

    initial: dict[str, float]
    free: tuple[str, ...]
    total: float
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def start(cls, initial: Mapping[str, float], sigma: float) -> CemState:
        w = dict(check_weights(dict(initial)))
        if not (math.isfinite(sigma) and sigma > 0.0):
            raise InvalidValue(f'sigma {sigma!r}; expected a finite number > 0 (log space)')
        free = tuple(t for t in TERMS if w[t] > 0.0)
        logits = np.log(np.array([w[t] for t in free]))
        return cls(
            initial=w,
            free=free,
            total=float(sum(w.values())),
            mean=logits - logits.mean(),
            std=np.full(len(free), float(sigma)),
        )

    def weights(self, logits: np.ndarray) -> dict[str, float]:
        """The 14 weights of a logit vector: the initial sum kept (to 1e-12 per term), the off
        terms 0. Rounded to 12 decimals, so the starting mean gives back the initial weights
        exactly, not within a rounding error that could flip a tie between two slots."""
        z = np.exp(logits - logits.max())
        share = z / z.sum()
        out = dict.fromkeys(TERMS, 0.0)
        for t, s in zip(self.free, share, strict=True):
            out[t] = round(float(self.total * s), 12)
        return out

    def sample(self, rng: np.random.Generator, population: int) -> list[np.ndarray]:
        """Candidate 1 is the mean; the others ~ Normal(mean, std), re-centred."""
        if population < 1:
            raise InvalidValue(f'population {population}; expected >= 1')
        out = [self.mean.copy()]
        for _ in range(population - 1):
            x = rng.normal(self.mean, self.std)
            out.append(x - x.mean())
        return out

    def update(
        self, candidates: Sequence[np.ndarray], scores: Sequence[Score], frac: float
    ) -> list[int]:
        """Move the search towards the elite; returns the elite's candidate indices, best first
        (ties keep candidate order)."""
        if len(candidates) != len(scores) or not candidates:
            raise InvalidValue(f'{len(candidates)} candidates with {len(scores)} scores')
        if not 0.0 < frac <= 1.0:
            raise InvalidValue(f'elite fraction {frac!r}; expected 0 < fraction <= 1')
        order = sorted(range(len(scores)), key=lambda k: (scores[k], k))
        elite = order[: max(1, math.ceil(len(scores) * frac))]
        pts = np.array([candidates[k] for k in elite])
        mean = (1.0 - MEAN_STEP) * self.mean + MEAN_STEP * pts.mean(axis=0)
        self.mean = mean - mean.mean()
        self.std = np.maximum(STD_FLOOR, (1.0 - STD_STEP) * self.std + STD_STEP * pts.std(axis=0))
        return elite
