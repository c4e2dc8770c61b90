"""The episode loop of ARCHITECTURE §1, written once against ports.

source presents and STOPS -> perceive -> pick -> weigh in hand -> plan -> place -> settle
-> the referee measures every attempted carton -> report.

The nodes wire the ports to ROS services and actions; the in-process wiring calls the same
objects directly. Outcome rules follow docs/levels.md §2.4 and docs/measurement.md §7.

The ports the loop is written against are in core/ports.py. `_Loop` is the episode's state
machine, its steps in the order they run, so the loop of ARCHITECTURE §1 reads top to bottom in
one place. Its helpers with a life of their own live elsewhere (the buffer in
core.planning.buffer, the referee's rules in core.measure).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Final, Literal, cast

from palletizer.core.config.cell import CellConfig
from palletizer.core.contracts import (
    EpisodeResult,
    FailureCause,
    HeightMap,
    Observation,
    PackageSpec,
    PalletGeometry,
    PalletState,
    Placement,
    PlacementPlan,
)
from palletizer.core.cycle import CycleClock, spans_payload
from palletizer.core.measure import Tolerances, measure_placement, pallet_state, world_to_pallet
from palletizer.core.planning import Planner
from palletizer.core.planning.buffer import Buffer, BufferSettings, BufferSlot, BufferTable
from palletizer.core.ports import (
    CellPort,
    EpisodeAborted,
    ExecutorPort,
    GaugePort,
    MotionOutcome,
    PerceptionPort,
    Presented,
    RefereePort,
    SinkPort,
)
from palletizer.core.vocab import CyclePhase, EventKind

if TYPE_CHECKING:
    from palletizer.core.pallet_spec import PalletSpec

__all__ = [
    'HALTING',
    'EVENT_KINDS',
    'EpisodeSettings',
    'last_resort_line',
    'run_episode',
]


class _Aside(Enum):
    """What set_aside answers when it could not begin: no buffer, no place in it, or the
    executor refused the move before anything moved (the carton is still in hand)."""

    refused = 'refused'


REFUSED: Final = _Aside.refused

# Failures after which a real cell stops the arm where it is and waits for the operator: a
# carton lost in flight (it lies where nobody has looked) or a strike. The episode's last park
# would drive the arm through a scene its map no longer shows.
HALTING: Final = frozenset({FailureCause.grasp_slip, FailureCause.collision})

EVENT_KINDS = EventKind.names()


@dataclass(frozen=True)
class EpisodeSettings:
    """Episode rules: duration cap [s sim], settle time [s], replans, tolerances.

    settle_s: simulated time from the end of a place to the referee's measurement; the
    executor's ready move (when it has one) runs inside it. detect_early: look for the next
    carton as soon as a place is done and send the ready move over it (_Loop.detect_next).
    """

    max_duration_s: float = 600.0
    settle_s: float = 1.25
    place_retries: int = 2
    tolerances: Tolerances = field(default_factory=Tolerances)
    pallet: PalletGeometry = field(default_factory=PalletGeometry)
    detect_retries: int = 2  # further detections after an empty one, each on fresh frames
    detect_retry_wait_s: float = 0.2  # [s sim] held between two detections
    buffer: BufferTable | None = None  # the set-aside buffer (None or 0 slots: none)
    detect_early: bool = False
    # The pallet spec (core/pallet_spec.py) the referee measures the final stack against, with
    # the catalogue its rules read (core.config Catalogue); None: no spec, nothing measured.
    pallet_spec: PalletSpec | None = None
    catalogue: Any = None

    @classmethod
    def from_config(
        cls, cell: CellConfig, buffer: BufferSettings | None = None
    ) -> EpisodeSettings:
        """From configs/cell.yaml (Config.cell): the `episode` block and the settle time; with
        the buffer settings of configs/planner.yaml (Config.planner.buffer), the set-aside
        buffer on the auxiliary table, reached where the analytic IK reaches."""
        ep, tol = cell.episode, cell.episode.tolerance
        table = None
        if buffer is not None and buffer.slots > 0:
            from palletizer.core.motion.reach import AnalyticReach

            table = BufferTable.from_config(cell, buffer, AnalyticReach())
        return cls(
            buffer=table,
            pallet=PalletGeometry.from_config(cell.pallet),
            max_duration_s=ep.max_duration_s,
            settle_s=cell.physics.settle_after_release_s,
            place_retries=ep.place_retries,
            tolerances=Tolerances(tol.xy, tol.yaw, tol.overhang, tol.square),
            detect_retries=ep.detect_retries,
            detect_retry_wait_s=ep.detect_retry_wait_s,
            detect_early=ep.detect_early,
        )


@dataclass
class _Attempt:
    seq: int
    spec: PackageSpec
    plan: PlacementPlan | None


# [s] after the retract began, the first reading a zero on the move takes: the cups have
# left the lid (the release holds until the vacuum is gone; 50 ms more of the lift-off).
_RETRACT_SETTLE_S = 0.05

# A carton set aside whose centre rests farther than this from the set-down height is not on
# the auxiliary table (it fell, or the table is not where the config says).
_OFF_TABLE_M = 0.02


def last_resort_line(payload: Mapping[str, Any]) -> str:
    """The progress line of a `plan` event with last_resort (after the carton's id)."""
    support = payload.get('support')
    share = f'{float(support) * 100:.0f} %' if isinstance(support, (int, float)) else 'less'
    return (
        f'last resort: a slot with {share} of its base supported (retry {payload.get("retry", 0)})'
    )


def _r(x: float, nd: int = 1) -> float:
    return round(float(x), nd)


class _Loop:
    def __init__(
        self,
        level: int,
        seed: int,
        task: str,
        cell: CellPort,
        perception: PerceptionPort,
        gauge: GaugePort,
        planner: Planner,
        executor: ExecutorPort,
        referee: RefereePort,
        sink: SinkPort,
        settings: EpisodeSettings,
        oracle: bool,
        git_sha: str,
    ) -> None:
        self.level, self.seed, self.task = level, seed, task
        self.cell, self.perception, self.gauge = cell, perception, gauge
        self.planner, self.executor, self.referee, self.sink = planner, executor, referee, sink
        self.s, self.oracle, self.git_sha = settings, oracle, git_sha
        self.seq = 0
        self.attempts: list[_Attempt] = []
        self.measured: list[Placement] = []
        # What the player believes it stacked: each completed place at its planned pose. The
        # planner builds on these; the referee's measurements only score (ARCHITECTURE §5).
        self.believed: list[Placement] = []
        self.scores: list[Mapping[str, float]] = []
        self.plan_scores: list[float] = []
        self.max_drift = 0.0
        self.n_objects = 0
        self.counting = False  # the cell did not say how many: count the cartons that come
        self.photographed: set[int] = set()
        self.buffer = Buffer(settings.buffer) if settings.buffer is not None else None
        self.buffer_moves = 0  # set-asides and take-backs
        self.buffer_motion_s = 0.0  # [s sim] spent on them
        self.last_move = ''  # what the last carton() or drain() did, for the progress line
        self.progress: Callable[[str], None] | None = None
        self.clock = CycleClock()  # the phases of the carton cycle in progress
        # The next carton as presented and seen right after a place (detect_next), for
        # carton() to take up instead of asking again; None when not looked for yet.
        self.early: tuple[Presented, Observation | None] | None = None

    # -- reporting ---------------------------------------------------------------------------

    def emit(self, kind: str, package_id: str = '', **payload: Any) -> None:
        if kind == 'fail':
            # The cycle a failure cuts short, so its time is attributed as a settled one is.
            payload = {**payload, **spans_payload(self.clock.close(self.cell.sim_time()))}
        self.sink.event(self.seq, round(self.cell.sim_time(), 2), kind, package_id, payload)
        self.seq += 1

    # -- the cycle's phases ------------------------------------------------------------------

    def at(self, phase: CyclePhase) -> None:
        """`phase` of the carton cycle begins now."""
        self.clock.mark(phase, self.cell.sim_time())

    def marked(
        self, phase: CyclePhase, call: Callable[..., MotionOutcome], *args: Any
    ) -> MotionOutcome:
        """An executor call, call(*args), that begins in `phase`, refined by the phases it
        reports."""
        t0 = self.cell.sim_time()
        self.clock.mark(phase, t0)
        out = call(*args)
        self.clock.marks_within(out.phases, t0, self.cell.sim_time())
        return out

    # -- the referee -------------------------------------------------------------------------

    def remeasure(self) -> list[Placement]:
        """Measure every attempted carton that was planned onto the pallet."""
        planned = [a for a in self.attempts if a.plan is not None]
        expect = getattr(self.referee, 'expect', None)
        if expect is not None:  # a placement check of the player's own: it needs the plans
            for a in planned:
                expect(a.spec.package_id, a.plan, a.spec)
        poses = self.referee.poses([a.spec.package_id for a in planned])
        out: list[Placement] = []
        for a in planned:
            assert a.plan is not None
            planned_pose = world_to_pallet((*a.plan.position, a.plan.yaw), self.s.pallet)
            found = poses.get(a.spec.package_id)
            actual_pose = world_to_pallet(found, self.s.pallet) if found else planned_pose
            placement = measure_placement(
                a.seq,
                a.spec,
                a.plan.layer,
                planned_pose,
                actual_pose,
                out,
                pallet=self.s.pallet,
                tolerances=self.s.tolerances,
            )
            # A lost carton the referee cannot find is not placed (its pose: the plan's).
            out.append(placement if found else dataclasses.replace(placement, placed=False))
        return out

    def believe(self, attempt: _Attempt) -> Placement:
        """The completed place as the player knows it: the carton where it was planned, with
        the weighed spec, on the stack it believes (no simulator truth)."""
        assert attempt.plan is not None
        planned = world_to_pallet((*attempt.plan.position, attempt.plan.yaw), self.s.pallet)
        return measure_placement(
            attempt.seq,
            attempt.spec,
            attempt.plan.layer,
            planned,
            planned,
            self.believed,
            pallet=self.s.pallet,
            tolerances=self.s.tolerances,
        )

    def stack_state(self, placements: Sequence[Placement], after_seq: int) -> PalletState:
        """The stack as the player believes it (weighed CoGs in the frame each carton was
        planned in)."""
        offsets = {a.spec.package_id: a.spec.cog_offset_m for a in self.attempts}
        return pallet_state(
            after_seq, placements, offsets, settle_drift_m=self.max_drift, pallet=self.s.pallet
        )

    def measured_state(self, after_seq: int) -> PalletState:
        """The referee's stack: the measured poses with the true CoGs in the body frame those
        poses' yaws are of (weighed ones where the referee has none)."""
        offsets = {a.spec.package_id: a.spec.cog_offset_m for a in self.attempts}
        truth = getattr(self.referee, 'cog_offsets', None)
        if truth is not None and self.measured:
            offsets.update(truth([p.package_id for p in self.measured]))
        return pallet_state(
            after_seq, self.measured, offsets, settle_drift_m=self.max_drift, pallet=self.s.pallet
        )

    # -- photos ------------------------------------------------------------------------------

    def photo(self, after_seq: int, park: bool = True) -> None:
        """Park the arm, then have the sink take the photos of the stack after `after_seq`.

        The park is physics (the arm moves, sim time passes): it happens with every executor
        that has one, whether or not the sink takes photos, so results do not depend on the
        telemetry. A refused park leaves the arm where it is; the photo is taken anyway.
        `park` False: the arm stays where it stopped (after a fault, HALTING).
        """
        if after_seq in self.photographed:
            return
        self.photographed.add(after_seq)
        self.at(CyclePhase.photo)
        move = getattr(self.executor, 'park', None) if park else None
        if move is not None:
            move()
        shoot = getattr(self.sink, 'layer_photo', None)
        if shoot is not None:
            shoot(after_seq)

    def layer_photo_due(self, layer: int) -> int | None:
        """after_seq of the photo due before placing on `layer` (docs/telemetry.md §8.8): when the
        layer exceeds every layer measured so far, the last measured attempt; else None."""
        if not self.measured or layer <= max(p.layer for p in self.measured):
            return None
        return self.measured[-1].seq

    # -- one carton --------------------------------------------------------------------------

    def carton(self) -> FailureCause | None | bool:
        """Handle the next carton. True = source exhausted; None = ok; else the failure."""
        self.at(CyclePhase.wait)
        if self.cell.sim_time() > self.s.max_duration_s:
            self.emit('fail', cause=FailureCause.timeout.value, reason='episode time exceeded')
            return FailureCause.timeout
        seen: Observation | None = None
        if self.early is not None:
            (shown, seen), self.early = self.early, None
        else:
            shown = self.cell.present()
        state = {
            'source': self.task,
            'pending': shown.pending,
            'exhausted': shown.exhausted,
            'jammed': shown.jammed,
            **dict(shown.extras),
        }
        if shown.package_id is None:
            if shown.exhausted and not shown.jammed:
                return True
            self.emit('perceive', seen=0, confidence=0.0, **state)
            self.emit(
                'fail',
                cause=FailureCause.timeout.value,
                reason='the source jammed: no carton arrived at rest',
            )
            return FailureCause.timeout
        pid = shown.package_id
        if self.counting:
            self.n_objects += 1
        self.at(CyclePhase.detect)
        obs = seen if seen is not None else self.perception.detect(pid)
        tries = 1
        # An empty or ambiguous view is tried again on fresh frames (new sensor noise) before
        # the episode ends with no_detection.
        while obs is None and tries <= self.s.detect_retries:
            self.cell.settle(self.s.detect_retry_wait_s)
            obs = self.perception.detect(pid)
            tries += 1
        self.emit(
            'perceive',
            seen=0 if obs is None else 1,
            confidence=0.0 if obs is None else _r(obs.confidence, 3),
            tries=tries,
            **state,
        )
        if obs is None:
            self.emit(
                'fail',
                cause=FailureCause.no_detection.value,
                reason=f'no confident detection of the presented carton in {tries} tries',
            )
            return FailureCause.no_detection
        picked = self.marked(CyclePhase.descend, self.executor.pick, obs)
        if not picked.ok:
            cause = picked.cause or FailureCause.grasp_slip
            self.emit('fail', cause=cause.value, reason=picked.reason)
            return cause
        self.cell.release(pid)  # the carton left the station: the source may stage the next
        measure = getattr(self.perception, 'measure_held', None)
        if measure is not None:
            # What the camera above the pick could not see (the height of a carton standing on
            # another) is measured in hand, lifted clear.
            self.at(CyclePhase.measure)
            held = measure(obs)
            if held is None:
                self.executor.return_to_source(obs)
                why = getattr(self.perception, 'held_reason', '')
                self.emit(
                    'fail',
                    pid,
                    cause=FailureCause.no_detection.value,
                    reason='the carton in the gripper could not be measured'
                    + (f': {why}' if why else ''),
                )
                return FailureCause.no_detection
            obs = held
        self.at(CyclePhase.weigh)
        spec = self.gauge.weigh(obs)
        if spec is None:
            self.emit(
                'fail',
                pid,
                cause=FailureCause.grasp_slip.value,
                reason='the wrist gauge read no steady payload',
            )
            return FailureCause.grasp_slip
        weighed = getattr(self.gauge, 'last_weigh', '')
        label = getattr(self.perception, 'held_label', None)
        if label is not None and label.face:
            spec = dataclasses.replace(spec, label_face=label.face)
        self.emit(
            'pick',
            pid,
            mass_kg=_r(spec.mass_kg, 3),
            type=spec.type_name,
            cog_offset_mm=[_r(v * 1000) for v in spec.cog_offset_m],
            dims_mm=[_r(v * 1000) for v in spec.dims_m],
            **{k: v for k, v in picked.details.items()},
            # A gauge that weighed on the lift says so (core.gauge_lift): without stopping
            # ('lift'), or after a short hold that the lift's fit took to converge
            # ('lift_hold', weigh_topped_up).
            **({'weighed': weighed} if weighed in ('lift', 'lift_hold') else {}),
            # The label as the cameras read it: its face (package frame) and how it was told,
            # or why not ('' face).
            **(
                {'label': label.face, 'label_how': label.how or label.reason}
                if label is not None
                else {}
            ),
        )
        return self.place_held(spec, obs)

    def place_held(
        self,
        spec: PackageSpec,
        obs: Observation,
        slot: BufferSlot | None = None,
        last_resort: bool = False,
    ) -> FailureCause | None:
        """Plan and place the carton in hand (picked at `obs`; from buffer slot `slot`, or the
        source), or set it aside when the pallet has no slot for it and the buffer a place.

        Where the episode would end for want of a slot (no place in the buffer, or
        `last_resort`: the load is done and this carton waits in the buffer), the planner is
        asked once more with last_resort (Planner.choose), and the plan event says so.
        """
        pid = spec.package_id
        attempt = _Attempt(self.seq, spec, None)
        self.attempts.append(attempt)
        heightmap = self.perception.heightmap()
        pallet = self.stack_state(self.believed, attempt.seq) if self.believed else None
        excluded: list[str] = []
        placed_out: MotionOutcome | None = None
        for retry in range(self.s.place_retries + 1):
            self.at(CyclePhase.plan)
            forced = last_resort
            if last_resort:
                result = self.planner.choose(
                    spec, heightmap, pallet, tuple(excluded), last_resort=True
                )
            else:
                result = self.planner.choose(spec, heightmap, pallet, tuple(excluded))
                if result.plan is None:
                    aside = self.set_aside(spec, heightmap, slot)
                    if aside is not REFUSED:
                        return aside
                    forced = True
                    result = self.planner.choose(
                        spec, heightmap, pallet, tuple(excluded), last_resort=True
                    )
            if result.plan is None:
                if last_resort:
                    aside = self.set_aside(spec, heightmap, slot)
                    if aside is not REFUSED:
                        return aside
                return self.no_slot(
                    obs,
                    pid,
                    'the planner found no slot'
                    + (' and the buffer has no place' if self.buffer is not None else ''),
                    reject=dict(result.reject_summary) or None,
                )
            plan = result.plan
            self.emit_plan(pid, plan, heightmap, retry, forced)
            placed_out = self.marked(CyclePhase.cross, self.executor.place, plan, spec, heightmap)
            if placed_out.ok:
                attempt.plan = plan
                break
            replannable = placed_out.cause in (FailureCause.ik_unreachable, FailureCause.collision)
            if not (replannable and placed_out.holding):
                attempt.plan = plan if not placed_out.holding else None
                lost = getattr(self.referee, 'lost', None)
                if lost is not None and not placed_out.holding:
                    lost(pid)  # the own check looks for it at its slot, and nowhere else
                cause = placed_out.cause or FailureCause.grasp_slip
                self.emit('fail', pid, cause=cause.value, reason=placed_out.reason)
                return cause
            excluded.append(plan.slot)
        else:
            aside = self.set_aside(spec, heightmap, slot)
            if aside is not REFUSED:
                return aside
            return self.no_slot(
                obs, pid, f'no reachable slot after {len(excluded)} tries: {excluded}'
            )
        assert placed_out is not None and attempt.plan is not None
        return self.settled(attempt, placed_out, slot)

    def no_slot(self, obs: Observation, pid: str, reason: str, **extra: Any) -> FailureCause:
        """The carton in hand has no slot on the pallet nor in the buffer: it goes back to the
        source and the episode ends with wrong_placement (`extra`: more of the fail event)."""
        self.executor.return_to_source(obs)
        self.emit('fail', pid, cause=FailureCause.wrong_placement.value, **extra, reason=reason)
        return FailureCause.wrong_placement

    def emit_plan(
        self, pid: str, plan: PlacementPlan, heightmap: HeightMap, retry: int, forced: bool
    ) -> None:
        """The plan event of a placement about to run; the finished layer's photo when due."""
        self.emit(
            'plan',
            pid,
            layer=plan.layer,
            slot=plan.slot,
            score=round(plan.score, 4),
            breakdown={k: round(v, 4) for k, v in plan.breakdown.items()},
            heightmap_top_mm=_r(heightmap.top * 1000),
            observed_pct=_r(heightmap.observed_ratio * 100),
            retry=retry,
            **(
                {'last_resort': True, 'support': round(plan.predicted_support, 3)}
                if forced
                else {}
            ),
        )
        self.scores.append(plan.breakdown)
        self.plan_scores.append(plan.score)
        due = self.layer_photo_due(plan.layer)
        if due is not None:
            self.photo(due)  # the finished layer, before the next one covers it

    def settled(
        self, attempt: _Attempt, placed_out: MotionOutcome, slot: BufferSlot | None
    ) -> FailureCause | None:
        """After a place the executor reports done: the stack settles, is measured, and the
        newest carton and every one below are judged (a collapse, a miss, an overhang)."""
        pid = attempt.spec.package_id
        drift = float(placed_out.details.get('drift_m', 0.0))
        # The stack gets settle_s of simulated time before the referee measures it; the empty
        # arm spends it going to wait above the source (executors with `ready`), out of the
        # stack's way, the gauge zeroes the empty tool there (gauges with `zero`), and the cell
        # settles whatever is left.
        placed_at = self.cell.sim_time()
        above = self.detect_next() if self.s.detect_early else None
        # The empty cups' retract is part of the move back a gauge may zero on: its readings
        # from _RETRACT_SETTLE_S after the retract began (the cups off the lid).
        retract = [t for phase, t in placed_out.phases if phase is CyclePhase.retract]
        since = retract[-1] + _RETRACT_SETTLE_S if retract else None
        self.after_place(phases=True, above=above, moved_since=since)
        self.at(CyclePhase.settle)
        left = self.s.settle_s - (self.cell.sim_time() - placed_at)
        if left > 1e-9:
            self.cell.settle(left)
        previous = {p.package_id: p.placed for p in self.measured}
        self.measured = self.remeasure()
        newest = self.measured[-1]
        self.max_drift = max(self.max_drift, drift)
        self.emit(
            'place',
            pid,
            error_xy_mm=_r(newest.error_xy_m * 1000),
            error_yaw_deg=_r(math.degrees(newest.error_yaw_rad)),
            overhang_mm=_r(newest.overhang_m * 1000),
            reach_residual_mm=_r(float(placed_out.details.get('reach_residual_m', 0.0)) * 1000),
        )
        # The carton's cycle ends with its settle; the next one begins where it ends.
        now = self.cell.sim_time()
        cycle = spans_payload(self.clock.close(now))
        self.clock.begin(CyclePhase.wait, now)
        # A gauge that zeroed on the move back, without holding still, says so.
        zeroed = {'zeroed': 'move'} if getattr(self.gauge, 'last_zero', '') == 'move' else {}
        self.emit('settle', pid, layer=newest.layer, drift_mm=_r(drift * 1000), **zeroed, **cycle)
        self.sink.placement(newest)
        self.sink.pallet_state(self.measured_state(newest.seq))
        self.believed.append(self.believe(attempt))
        self.planner.record(self.believed[-1])
        collapsed = [
            p.package_id for p in self.measured if previous.get(p.package_id) and not p.placed
        ]
        if collapsed:
            self.emit('fail', pid, cause=FailureCause.stack_collapse.value, moved=collapsed)
            return FailureCause.stack_collapse
        if not newest.placed:
            cause = (
                FailureCause.overhang_violation
                if newest.overhang_m > self.s.tolerances.overhang_m
                else FailureCause.wrong_placement
            )
            self.emit('fail', pid, cause=cause.value)
            return cause
        self.last_move = (
            f'{newest.package_id} {newest.package_type} L{newest.layer} '
            f'{newest.error_xy_m * 1000:.1f} mm'
            + ('' if slot is None else f' (from buffer {slot.index})')
        )
        return None

    # -- the set-aside buffer ----------------------------------------------------------------

    def detect_next(self) -> Observation | None:
        """The next carton, looked for as soon as a place is done: the arm is over the pallet,
        out of the station camera's view, so the carton may be seen before the arm goes to
        wait beside the station, and the ready move may go over it instead. Presented once
        (kept for carton(), which does not ask again) and detected once: an empty view is
        tried again by carton() from the ready pose, as without this. None when no carton
        is there to be seen, the executor has no ready move, or it was not seen."""
        if getattr(self.executor, 'ready', None) is None:
            return None
        if self.early is None:
            if self.cell.sim_time() > self.s.max_duration_s:
                return None  # carton() ends the episode for its time
            self.at(CyclePhase.wait)
            shown = self.cell.present()
            seen = None
            if shown.package_id is not None:
                self.at(CyclePhase.detect)
                seen = self.perception.detect(shown.package_id)
            self.early = (shown, seen)
        return self.early[1]

    def after_place(
        self,
        phases: bool = False,
        above: Observation | None = None,
        moved_since: float | None = None,
    ) -> None:
        """The empty arm's move to wait above the source (over the carton `above` when given)
        and the gauge's tare (when the ports have them), as after every place. phases: mark
        them as the cycle's return and settle (a set-aside's stay in its buffer phase).
        moved_since [s sim]: when the empty arm's move began, if before the ready move (the
        retract's); the gauge may zero on the readings since."""
        ready = getattr(self.executor, 'ready', None)
        if ready is not None:
            if phases:
                self.at(CyclePhase.return_)
            now = self.cell.sim_time()
            moved_since = now if moved_since is None else min(moved_since, now)
            if above is None:
                ready()
            else:
                ready(above)
        zero = getattr(self.gauge, 'zero', None)
        if zero is not None:
            if phases:
                self.at(CyclePhase.settle)  # the tare's hold counts towards the settle
            # The empty move's readings may zero the gauge (gauges that zero on the move).
            zero(moved_since=moved_since)

    def set_aside(
        self, spec: PackageSpec, heightmap: HeightMap, slot: BufferSlot | None = None
    ) -> FailureCause | None | Literal[_Aside.refused]:
        """Put the carton in hand down in the buffer (back in `slot` when it came from there).

        None: set aside; REFUSED: no buffer, no place in it, or the executor refused the move
        before anything moved (the carton is still in hand); else the failure of the move.
        """
        if self.buffer is None:
            return REFUSED
        slot = slot or self.buffer.slot_for(spec)
        if slot is None:
            return REFUSED
        self.at(CyclePhase.buffer)
        t0 = self.cell.sim_time()
        plan = PlacementPlan(slot.position, slot.yaw, 1, f'buffer-{slot.index}', 0.0, 0.0, {})
        out = self.executor.place(plan, spec, heightmap)
        if not out.ok:
            if out.holding:
                return REFUSED
            cause = out.cause or FailureCause.grasp_slip
            self.emit('fail', spec.package_id, cause=cause.value, reason=out.reason)
            return cause
        self.buffer.put(spec, slot)
        self.after_place()
        self.buffer_moves += 1
        self.buffer_motion_s += self.cell.sim_time() - t0
        # The referee measures where it landed against the set-down pose (scoring only).
        x, y, z, yaw = self.referee.poses([spec.package_id])[spec.package_id]
        err_yaw = math.remainder(yaw - slot.yaw, math.pi)  # a box is symmetric under a half turn
        err_z = z - slot.position[2]
        self.emit(
            'place',
            spec.package_id,
            buffer_slot=slot.index,
            error_xy_mm=_r(math.hypot(x - slot.position[0], y - slot.position[1]) * 1000),
            error_z_mm=_r(err_z * 1000),
            error_yaw_deg=_r(math.degrees(err_yaw)),
            overhang_mm=_r(self.buffer.table.overhang(spec.dims_m, (x, y, yaw)) * 1000),
            reach_residual_mm=_r(float(out.details.get('reach_residual_m', 0.0)) * 1000),
        )
        if abs(err_z) > _OFF_TABLE_M:
            self.buffer.take(spec.package_id)
            self.emit(
                'fail',
                spec.package_id,
                cause=FailureCause.wrong_placement.value,
                reason=f'the carton set aside is not on the auxiliary table: it rests '
                f'{err_z * 1000:+.0f} mm from the set-down height',
            )
            return FailureCause.wrong_placement
        self.last_move = f'{spec.package_id} {spec.type_name} -> buffer {slot.index}'
        return None

    def drain(self, last_resort: bool = False) -> FailureCause | None:
        """Take back from the buffer, oldest first, each carton the stack now has a slot for,
        until a pass places none. A carton taken back that no slot takes after all goes back
        to its place in the buffer. last_resort (the load is done): a slot the planner finds
        only as a last resort (Planner.choose) counts."""
        progress = True
        while progress and self.buffer is not None and len(self.buffer):
            progress = False
            heightmap = self.perception.heightmap()
            pallet = self.stack_state(self.believed, self.seq) if self.believed else None
            for waiting in self.buffer.specs():
                ask = {'last_resort': True} if last_resort else {}
                if self.planner.choose(waiting, heightmap, pallet, (), **ask).plan is None:
                    continue
                spec, slot = self.buffer.take(waiting.package_id)
                self.at(CyclePhase.buffer)
                obs = Buffer.observation(spec, slot)
                lid_seen = self.measure_set_aside(obs)
                if isinstance(lid_seen, Observation):
                    # The cups aim at the lid as it stands, and the carton's height from the
                    # table's top replaces the in-hand measurement for the rest of its way.
                    lid_mm: dict[str, Any] = {
                        'lid_shift_mm': _r((lid_seen.dims_guess[2] - obs.dims_guess[2]) * 1000)
                    }
                    obs = lid_seen
                    spec = dataclasses.replace(spec, dims_m=lid_seen.dims_guess)
                else:
                    lid_mm = {} if lid_seen is None else {'lid_unseen': lid_seen}
                t0 = self.cell.sim_time()
                picked = self.executor.pick(obs)
                self.buffer_moves += 1
                self.buffer_motion_s += self.cell.sim_time() - t0
                if not picked.ok:
                    cause = picked.cause or FailureCause.grasp_slip
                    self.emit(
                        'fail', spec.package_id, cause=cause.value, reason=picked.reason, **lid_mm
                    )
                    return cause
                self.emit(
                    'pick',
                    spec.package_id,
                    buffer_slot=slot.index,
                    mass_kg=_r(spec.mass_kg, 3),
                    type=spec.type_name,
                    cog_offset_mm=[_r(v * 1000) for v in spec.cog_offset_m],
                    dims_mm=[_r(v * 1000) for v in spec.dims_m],
                    **lid_mm,
                    **{k: v for k, v in picked.details.items()},
                )
                placed = len(self.believed)
                out = self.place_held(spec, obs, slot, last_resort)
                if out is not None:
                    return out
                if len(self.believed) > placed:
                    progress = True
                    if self.progress is not None:
                        self.progress(self.last_move)
                    break
        return None

    def measure_set_aside(self, obs: Observation) -> Observation | str | None:
        """The set-aside carton at `obs` as the perception sees it now (its optional
        measure_lid); the why when it does not see the lid; None without a measure."""
        measure = getattr(self.perception, 'measure_lid', None)
        if measure is None:
            return None
        got = measure(obs)
        if got is None:
            return str(getattr(self.perception, 'lid_reason', '') or 'lid not seen')
        return cast(Observation, got)

    def buffer_left(self) -> FailureCause | None:
        """At the end of the load: the cartons still set aside fit nowhere; the honest cause."""
        if self.buffer is None or not len(self.buffer):
            return None
        ids = [s.package_id for s in self.buffer.specs()]
        self.emit(
            'fail',
            ids[0],
            cause=FailureCause.wrong_placement.value,
            reason=f'the planner found no slot for the {len(ids)} set aside: {", ".join(ids)}',
        )
        return FailureCause.wrong_placement

    def result(self, failure: FailureCause | None, aborted: str | None = None) -> EpisodeResult:
        final = self.measured
        n_placed = sum(1 for p in final if p.placed)
        state = self.measured_state(self.seq) if final else None
        breakdown: dict[str, float] = {}
        for b in self.scores:
            for k, v in b.items():
                breakdown[k] = breakdown.get(k, 0.0) + v / len(self.scores)
        metrics: dict[str, Any] = {
            'score': round(n_placed / self.n_objects, 4) if self.n_objects else 0.0,
            'cog_offset_xy': round(math.hypot(*state.cog[:2]), 4) if state else 0.0,
            'fill_ratio': round(state.fill_ratio, 4) if state else 0.0,
            'settle_drift': round(self.max_drift, 5),
            'n_layers': max((p.layer for p in final), default=0),
            'layer_flatness': round(state.layer_flatness, 4) if state else 0.0,
            'max_overhang': round(max((p.overhang_m for p in final), default=0.0), 4),
            'min_stability_margin': round(state.stability_margin_m, 4) if state else 0.0,
            'mean_planner_score': round(sum(self.plan_scores) / len(self.plan_scores), 4)
            if self.plan_scores
            else 0.0,
            'planner_score_breakdown': {k: round(v, 4) for k, v in breakdown.items()},
        }
        if self.buffer is not None:
            metrics['buffer_moves'] = self.buffer_moves
            metrics['buffer_motion_s'] = round(self.buffer_motion_s, 2)
        if aborted is not None:
            metrics['aborted'] = True
            metrics['abort_reason'] = aborted
        if self.s.pallet_spec is not None:
            from palletizer.core.compliance import measure_stack

            masses = getattr(self.referee, 'masses', None)
            if masses is not None and final:
                true = masses([p.package_id for p in final])
                final = [dataclasses.replace(p, mass_kg=true[p.package_id]) for p in final]
            metrics['pallet_spec'] = self.s.pallet_spec.to_dict()
            comp = measure_stack(
                self.s.pallet_spec, final, self.s.catalogue, self.s.pallet.size_xy
            )
            metrics['compliance'] = comp.to_dict()
            # Placed carton volume over the deck area times the load height.
            deck = self.s.pallet.size_xy[0] * self.s.pallet.size_xy[1]
            volume = sum(math.prod(p.dims_m) for p in final if p.placed)
            metrics['density'] = (
                round(volume / (deck * comp.load_height_m), 4) if comp.load_height_m > 0 else 0.0
            )
        success = aborted is None and failure is None and n_placed == self.n_objects
        return EpisodeResult(
            seed=self.seed,
            level=self.level,
            n_objects=self.n_objects,
            n_placed=n_placed,
            n_misrouted=0,
            success=success,
            duration_s=round(self.cell.sim_time(), 3),
            failure=None if aborted is not None else failure,
            oracle=self.oracle,
            git_sha=self.git_sha,
            task=self.task,
            metrics=metrics,
        )


def run_episode(
    *,
    level: int,
    seed: int,
    task: str,
    cell: CellPort,
    perception: PerceptionPort,
    gauge: GaugePort,
    planner: Planner,
    executor: ExecutorPort,
    referee: RefereePort,
    sink: SinkPort,
    settings: EpisodeSettings | None = None,
    oracle: bool = False,
    git_sha: str = '',
    progress: Callable[[str], None] | None = None,
) -> EpisodeResult:
    """Run one episode to its end (or its first failure) and return the result.

    An EpisodeAborted raised by any port closes the episode as aborted: success False, failure
    None, metrics {"aborted": true} — no failure is invented.
    """
    loop = _Loop(
        level,
        seed,
        task,
        cell,
        perception,
        gauge,
        planner,
        executor,
        referee,
        sink,
        settings or EpisodeSettings(),
        oracle,
        git_sha,
    )
    loop.progress = progress
    try:
        n = cell.reset(level, seed)
        loop.n_objects, loop.counting = max(n, 0), n < 0
        loop.clock.begin(CyclePhase.wait, cell.sim_time())
        failure: FailureCause | None = None
        while True:
            outcome = loop.carton()
            if outcome is True:
                # The load is done: what still waits in the buffer gets the last resort.
                failure = loop.drain(last_resort=True) or loop.buffer_left()
                break
            if outcome is not None:
                failure = outcome  # type: ignore[assignment]  # not True or None: a cause
                break
            if progress is not None:
                progress(loop.last_move)
            failure = loop.drain()
            if failure is not None:
                break
        if loop.attempts:
            # The final photo, then the final measurement (it sees whatever the park did). After
            # a fault that leaves the cell as nobody has seen it, the arm is not moved again.
            loop.photo(loop.attempts[-1].seq, park=failure not in HALTING)
            loop.measured = loop.remeasure()
        return loop.result(failure)
    except EpisodeAborted as exc:
        return loop.result(None, aborted=exc.reason)
