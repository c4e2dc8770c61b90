"""Conveyor source: an opaque store, an elevator and two belt sections that stop at the station."""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import Enum

import mujoco

from palletizer.sim.cartons import CartonHandle, CartonLike
from palletizer.sim.sources.base import (
    JitterFn,
    Presented,
    RestMeter,
    RestWatch,
    SourceError,
    SourceState,
    StepWorld,
)
from palletizer.sim.sources.conveyor_layout import (
    LineParams,
    TableTop,
    conveyor_params,
    plan_store,
)
from palletizer.sim.sources.conveyor_mjcf import line_cartons_xml, line_scenery_xml

# LineParams, TableTop and conveyor_params live in conveyor_layout; they stay importable here.
__all__ = ['ConveyorSource', 'LineParams', 'TableTop', 'conveyor_params']


class _Lift(Enum):
    DOWN = 'down'
    LIFTING = 'lifting'
    UP = 'up'
    LOWERING = 'lowering'


class ConveyorSource:
    """Cartons wait in a black-box store, ride an elevator up and two belts to the station.

    Nothing teleports after staging. Every moving surface (store queue, infeed, elevator
    rollers, the two belt sections and, on table lines, the powered table top) is a kinematic
    deck whose surface velocity is set before every physics step; cartons move only through
    contact and friction. The elevator is a kinematically driven slide that lifts the carton by
    contact. A carton that tips or leaves the belt never arrives upright at the station, so the
    wait ends as jammed after `timeout_s`.

    The line accumulates: each deck downstream of the elevator is driven on its own, and runs
    only while a carton on it must move and none on it must stay. While one carton is presented
    (or still on its way), the next leaves the raised elevator and waits at the hold point
    (`LineParams.hold_front`): on the conveyor at the downstream end of belt_a while the
    presented carton rests on belt_b, on a table line at the table edge while it rests on the
    table. On release() it moves on to the station and the elevator fetches the one after.
    A running line is full when the pallet build starts: at reset the first carton stands at
    the station (as the reference cell staged its table carton, docs/levels.md §2.3) and the
    second at the hold point, so the first present() only waits for it to rest. Their staging
    jitter (dy, dyaw) is applied there as it would be in the store. Inside the store the head
    likewise waits at the mouth, on the infeed (`LineParams.store_hold_front`), whenever the
    elevator is not down and empty, and is staged there at reset: loading the platform covers
    0.49 m plus half the carton instead of 0.80 m plus half, 1.2 s less at store speed.

    Layout (LineParams, the store plan) lives in conveyor_layout, the MJCF in conveyor_mjcf;
    this class runs the line.
    """

    kind = 'conveyor'

    def __init__(
        self,
        draws: Sequence[CartonLike],
        jitter: JitterFn | None = None,
        params: LineParams | None = None,
    ) -> None:
        """`draws` in arrival order; `jitter(index, attempt)` gives (dx, dy, dyaw) staging offsets."""
        self.p = params or LineParams()
        if self.p.kind != self.kind:
            raise SourceError(
                f'{type(self).__name__}: params.kind = {self.p.kind!r}; expected {self.kind!r}'
            )
        self._draws = list(draws)
        if not self._draws:
            raise SourceError(f'{self.kind}: an empty load; expected at least one carton')
        self._jitter = jitter or (lambda index, attempt: (0.0, 0.0, 0.0))
        self._plan = plan_store(self.p, self._draws, self._jitter)
        self._ids = {d.index: d.package_id for d in self._draws}
        self._handles: dict[int, CartonHandle] = {}
        self._joints: dict[str, tuple[int, int]] = {}
        staged = (self._plan.held, self._plan.at_station)
        self._queue: list[int] = [d.index for d in self._draws if d.index not in staged]
        self._loading: int | None = None
        self._lifted: int | None = None
        self._next: int | None = self._plan.held  # waiting at, or heading to, the hold point
        self._active: int | None = self._plan.at_station  # heading to or at the station
        self._presented: Presented | None = None
        self._taken: list[int] = []
        self._jammed = False
        self._phase = _Lift.DOWN
        self._phase_t0 = 0.0
        self._load_rest = RestMeter(0.02, self.p.rest_time)
        self._station_rest = RestWatch(self.p.rest_speed, self.p.rest_time)

    # -- layout and MJCF (conveyor_layout, conveyor_mjcf) ----------------------------------------

    def staged_offsets(self) -> dict[int, tuple[float, float]]:
        """(dy [m], dyaw [rad]) each carton was staged with, after the side guides."""
        return {i: (s.dy, s.yaw) for i, s in self._plan.stages.items()}

    def scenery_xml(self) -> str:
        """Store, infeed, elevator, the two belt sections (and the table on table lines)."""
        tallest = max(d.dims[2] for d in self._draws)
        return line_scenery_xml(self.p, self.kind, self._plan.store_x0, tallest)

    def cartons_xml(self) -> str:
        """Every carton parked in the store (staging happens here, at build time)."""
        return line_cartons_xml(self._draws, self._plan.stages)

    # -- runtime --------------------------------------------------------------------------------

    def _deck_names(self) -> list[str]:
        k = self.kind
        names = [f'{k}_belt_a', f'{k}_belt_b', f'{k}_elevator', f'{k}_infeed', f'{k}_store_queue']
        return names + (['pick_table'] if self.p.table is not None else [])

    def bind(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Resolve carton and deck ids; put the elevator at its low stop, every deck still."""
        self._handles = {d.index: CartonHandle.bind(model, d.index, d.dims) for d in self._draws}
        joints = [f'{n}_drive' for n in self._deck_names()] + [f'{self.kind}_elevator_lift']
        for name in joints:
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
            if jid < 0:
                raise SourceError(
                    f'{self.kind}: joint {name!r} missing; compile scenery_xml() first'
                )
            self._joints[name] = (int(model.jnt_qposadr[jid]), int(model.jnt_dofadr[jid]))
        for qadr, dadr in self._joints.values():
            data.qpos[qadr] = 0.0
            data.qvel[dadr] = 0.0

    def _drive(self, data: mujoco.MjData, joint: str, qpos: float, qvel: float) -> None:
        qadr, dadr = self._joints[joint]
        data.qpos[qadr] = qpos
        data.qvel[dadr] = qvel

    def _lift_height(self, t: float) -> tuple[float, float]:
        """Commanded elevator (height above the low stop [m], velocity [m/s]); ends phases."""
        p = self.p
        travel = p.top - p.lower_height
        if self._phase in (_Lift.DOWN, _Lift.UP):
            return (0.0 if self._phase is _Lift.DOWN else travel), 0.0
        s = min(max((t - self._phase_t0) / p.lift_time, 0.0), 1.0)
        z = 0.5 * travel * (1.0 - math.cos(math.pi * s))
        v = 0.5 * travel * math.pi / p.lift_time * math.sin(math.pi * s)
        if self._phase is _Lift.LOWERING:
            z, v = travel - z, -v
        if s >= 1.0:
            self._phase = _Lift.UP if self._phase is _Lift.LIFTING else _Lift.DOWN
        return z, v

    def before_step(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Run the line for one physics step: elevator, loading, delivery."""
        p = self.p
        k = self.kind
        t = float(data.time)
        z, vz = self._lift_height(t)
        pcx = 0.5 * (p.platform_x[0] + p.platform_x[1])
        v_queue = v_infeed = v_rollers = 0.0

        # Loading: the head of the store rolls onto the platform while it is down and empty;
        # while the platform is away it advances to the mouth and waits there, inside the box.
        if self._loading is None and self._queue:
            self._loading = self._queue.pop(0)
            self._load_rest.reset()
        if self._loading is not None:
            h = self._handles[self._loading]
            x = float(data.xpos[h.body][0])
            hx = float(h.half_extents(data)[0])
            if self._phase is _Lift.DOWN:
                move = x < pcx - p.store_brake_lead
                if move:
                    v_rollers = p.store_speed
                    self._load_rest.reset()
                elif self._load_rest.update(t, h.lid_speed(model, data)):
                    self._lifted, self._loading = self._loading, None
                    self._phase, self._phase_t0 = _Lift.LIFTING, t
            else:
                move = x + hx < p.store_hold_front - p.store_brake_lead
            # The carton behind rides the same infeed: once the loading one has left it, the
            # infeed stops with the follower at the hold front. (A 190 mm mini_s followed the
            # loading one to 11 mm over the platform; the lift caught its edge: level 17 seed 18.)
            if move and (x - hx < p.infeed_x[1] + p.store_brake_lead or self._follower_held(data)):
                v_infeed = p.store_speed
                if x - hx < p.queue_end + 0.01:
                    v_queue = p.store_speed  # the whole queue closes up behind the head

        # Delivery: the active carton heads for the station; the next one may leave the raised
        # platform for the hold point meanwhile; the one after waits on the platform.
        if self._active is None and self._presented is None and self._next is not None:
            self._active, self._next = self._next, None
        if self._phase is _Lift.UP:
            if self._lifted is not None:
                if self._active is None and self._presented is None:
                    self._active, self._lifted = self._lifted, None
                elif self._next is None and p.hold_front is not None:
                    self._next, self._lifted = self._lifted, None
            if self._lifted is None and self._platform_clear(data):
                self._phase, self._phase_t0 = _Lift.LOWERING, t
        running = self._running_decks(data)
        if self._phase is _Lift.UP and f'{k}_elevator' in running:
            v_rollers = p.speed

        self._drive(data, f'{k}_elevator_lift', z, vz)
        self._drive(data, f'{k}_elevator_drive', 0.0, v_rollers)
        self._drive(data, f'{k}_store_queue_drive', 0.0, v_queue)
        self._drive(data, f'{k}_infeed_drive', 0.0, v_infeed)
        for deck, _, _ in p.sections:
            self._drive(data, f'{deck}_drive', 0.0, p.speed if deck in running else 0.0)
        self._watch_station(model, data, t)

    def _watch_station(self, model: mujoco.MjModel, data: mujoco.MjData, t: float) -> None:
        """The station's rest sensor (RestWatch), fed while a carton is on its way or waits
        there unpresented: at the station, upright, and its lid slower than rest_speed."""
        if self._presented is not None or self._active is None:
            self._station_rest.clear()
            return
        if not self._station_rest.due(t):
            return
        h = self._handles[self._active]
        arrived = self._arrived(data, h)
        self._station_rest.update(t, h.lid_speed(model, data) if arrived else math.inf)

    def _running_decks(self, data: mujoco.MjData) -> set[str]:
        """Decks downstream of the store that run this step (the raised elevator included).

        A carton must move while short of its target (active: the station; next: the hold
        point, or `hold_margin` behind a stopped carton ahead); each target is undershot by
        `brake_lead`. A deck under a carton that must stay is stopped, and so is every carton
        touching a stopped deck (it would be dragged askew); a deck runs when a carton that
        must move stands on it or comes within `drive_lead` of it.
        """
        p = self.p
        decks = list(p.sections)
        if self._phase is _Lift.UP:
            decks.insert(0, (f'{self.kind}_elevator', *p.platform_x))
        spans: dict[int, tuple[float, float]] = {}
        moves: dict[int, bool] = {}
        for index in (self._active, self._next, self._lifted):
            if index is None:
                continue
            h = self._handles[index]
            x = float(data.xpos[h.body][0])
            hx = float(h.half_extents(data)[0])
            spans[index] = (x - hx, x + hx)
        if self._active is not None:
            x = float(data.xpos[self._handles[self._active].body][0])
            moves[self._active] = (
                self._presented is None
                and x < p.station[0] - p.brake_lead
                and self._station_clear(data)
            )
        if self._next is not None:
            target = p.hold_front if p.hold_front is not None else -math.inf
            if self._active is not None and not moves[self._active]:
                target = min(target, spans[self._active][0] - p.hold_margin)
            moves[self._next] = spans[self._next][1] < target - p.brake_lead
        if self._lifted is not None:
            moves[self._lifted] = False  # waits on the platform for the hold point to free

        def on(span: tuple[float, float], lead: float) -> set[str]:
            return {name for name, x0, x1 in decks if span[1] + lead > x0 and span[0] < x1}

        while True:
            stopped: set[str] = set().union(*(on(spans[i], 0.0) for i in spans if not moves[i]))
            stuck = [i for i in spans if moves[i] and on(spans[i], 0.0) & stopped]
            if not stuck:
                break
            for i in stuck:
                moves[i] = False
        wanted = set().union(*(on(spans[i], p.drive_lead) for i in spans if moves[i]))
        return wanted - stopped

    def _station_clear(self, data: mujoco.MjData) -> bool:
        """The line's presence sensor over the station: False while the carton taken last
        still reaches into the corridor the next one passes through on its way in (over the
        belt from the hold point to the station, up to the load's tallest carton + 50 mm). The
        arm weighs the carton it lifted there and then carries it away; the next one rolls in
        once it has left."""
        if not self._taken:
            return True
        p = self.p
        h = self._handles[self._taken[-1]]
        corners = h.bottom_corners(data)
        lo = corners.min(axis=0)
        hi = corners.max(axis=0)
        tallest = max(d.dims[2] for d in self._draws)
        upstream = p.hold_front if p.hold_front is not None else p.belt_x[0]
        upstream -= 0.7  # the arriving carton's length, at most
        return bool(
            lo[2] > p.top + tallest + 0.05
            or hi[2] + h.dims[2] < p.top
            or hi[0] < upstream
            or lo[0] > p.station[0] + 0.35
            or hi[1] < p.belt_y - p.belt_width / 2
            or lo[1] > p.belt_y + p.belt_width / 2
        )

    def _follower_held(self, data: mujoco.MjData) -> bool:
        """True while the store head behind the loading carton has room to ride on: its front
        short of the hold front by the slide of a stopping store deck (or no carton behind)."""
        if not self._queue:
            return True
        h = self._handles[self._queue[0]]
        front = float(data.xpos[h.body][0] + h.half_extents(data)[0])
        return front < self.p.store_hold_front - self.p.store_brake_lead

    def _platform_clear(self, data: mujoco.MjData) -> bool:
        """True when no delivered carton still stands over the raised platform."""
        for index in (self._active, self._next):
            if index is None:
                continue
            h = self._handles[index]
            back = data.xpos[h.body][0] - h.half_extents(data)[0]
            if back <= self.p.platform_x[1] + 0.01:
                return False
        return True

    def _arrived(self, data: mujoco.MjData, h: CartonHandle) -> bool:
        """At the station, upright, and standing on the belt (not fallen or tipped)."""
        p = self.p
        pos = data.xpos[h.body]
        return bool(
            abs(pos[0] - p.station[0]) <= p.station_tol
            and h.tilt(data) <= p.max_tilt
            and abs(pos[2] - (p.top + h.dims[2] / 2.0)) <= p.ride_tol
        )

    def present(self, world: StepWorld) -> Presented | None:
        """Step until the next carton rests at the station (lid slower than rest_speed for
        rest_time, watched all along by the line: at once if it came to rest meanwhile)."""
        if self._presented is not None:
            return self._presented
        if self._jammed or not self._pending():
            return None
        p = self.p
        tick = max(1, round(0.02 / float(world.model.opt.timestep)))  # 50 Hz measurement
        t0 = world.time
        while True:
            if self._active is not None and self._station_rest.resting:
                self._presented = Presented(self._ids[self._active], self._active)
                return self._presented
            if world.time - t0 >= p.timeout_s:
                break
            world.step(tick)
        self._jammed = True
        return None

    def release(self, package_id: str) -> None:
        """The arm took the presented carton; the one at the hold point moves on to the station."""
        if self._presented is None or self._presented.package_id != package_id:
            current = self._presented.package_id if self._presented else None
            raise SourceError(
                f'{self.kind}: release({package_id!r}) but the presented carton is {current!r}'
            )
        self._taken.append(self._presented.index)
        self._presented = None
        self._active = None

    def _pending(self) -> int:
        return len(self._draws) - len(self._taken)

    def state(self) -> SourceState:
        """Pending count, exhausted and jammed."""
        pending = self._pending()
        return SourceState(
            kind=self.kind, pending=pending, exhausted=pending == 0, jammed=self._jammed
        )

    def forecast(self) -> list[str]:
        """The store is opaque: nothing is seen ahead."""
        return []
