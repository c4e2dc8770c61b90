"""MJCF of the conveyor and table lines: the furniture (store, infeed, elevator, belts, pick
table) and the staged cartons a line adds to the MuJoCo scene."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from palletizer.sim.cartons import CartonLike, carton_body_xml, yaw_quat
from palletizer.sim.sources.conveyor_layout import LineParams, Stage

__all__ = ['line_cartons_xml', 'line_scenery_xml']

# Collision bits (docs/levels.md §1.2): furniture 3 meets cartons (1) and the arm (2); visuals 0.
_SOLID = 'contype="3" conaffinity="3" group="0"'
_VISUAL = 'contype="0" conaffinity="0" group="2"'
_DECK_RGBA = '0.12 0.12 0.13 1'
_FRAME_RGBA = '0.55 0.57 0.60 1'
# The black box: opaque, hides waiting cartons (docs/levels.md §2.3).
_STORE_RGBA = '0.05 0.05 0.06 1'
_MARKER_RGBA = '0.95 0.80 0.10 1'  # yellow station marker (docs/cell.md §3.4)


def _v(values: Sequence[float]) -> str:
    return ' '.join(f'{v:.6g}' for v in values)


def _box(
    name: str | None,
    centre: Sequence[float],
    half: Sequence[float],
    attrs: str,
    rgba: str,
    extra: str = '',
) -> str:
    label = f'name="{name}" ' if name else ''
    return (
        f'<geom {label}type="box" pos="{_v(centre)}" size="{_v(half)}" {attrs} '
        f'rgba="{rgba}" {extra}/>'
    )


def _fric(f: Sequence[float]) -> str:
    return f'friction="{_v(f)}"'


def _deck_body(
    name: str, centre: Sequence[float], half: Sequence[float], friction: Sequence[float]
) -> str:
    """A kinematic deck: a body on an X slide whose velocity (never position) is commanded.

    Its joint is reset to 0 and given the belt speed before every step, so contacts see a
    surface moving at belt speed while the deck itself stays put: cartons ride it by friction
    with no slip, as on a real belt, instead of being dragged over a static deck (which rocks
    them and turned a book_s 35 deg over the run).
    """
    return (
        f'<body name="{name}" pos="{_v(centre)}">'
        f'<joint name="{name}_drive" type="slide" axis="1 0 0" armature="1000" damping="0"/>'
        + _box(name, (0.0, 0.0, 0.0), half, _SOLID, _DECK_RGBA, _fric(friction) + ' mass="20"')
        + '</body>'
    )


def line_scenery_xml(p: LineParams, kind: str, store_x0: float, tallest: float) -> str:
    """Store, infeed, elevator, the two belt sections (and the table on table lines).

    `kind` prefixes the names of bodies, joints and geoms; `store_x0` is the upstream end of
    the store queue (StorePlan.store_x0) and `tallest` the load's tallest carton [m], which sets
    the top of the store's mouth.
    """
    k = kind
    y = p.belt_y
    hw = p.belt_width / 2.0
    pw = p.platform_width / 2.0
    dz = p.deck_thickness / 2.0
    parts: list[str] = []
    mid = 0.5 * (p.belt_x[0] + p.belt_x[1])
    # Two adjoining sections meeting at the middle (line B), each driven on its own so a
    # carton can wait on belt_a while the one ahead rests on belt_b (see
    # ConveyorSource.before_step).
    for name, a, b in p.sections[:2]:
        parts.append(
            _deck_body(
                name,
                ((a + b) / 2, y, p.top - dz),
                ((b - a) / 2, hw, dz),
                p.friction,
            )
        )
    length = p.belt_x[1] - p.belt_x[0]
    frame_h = (p.top - p.deck_thickness - 0.002) / 2.0
    parts.append(
        _box(
            f'{k}_belt_frame',
            (mid, y, frame_h),
            (length / 2, hw * 0.8, frame_h),
            _VISUAL,
            _FRAME_RGBA,
        )
    )
    for side in (-1.0, 1.0):
        parts.append(
            _box(
                None,
                (mid, y + side * (hw + 0.015), p.top - 0.03),
                (length / 2, 0.015, 0.035),
                _VISUAL,
                _FRAME_RGBA,
            )
        )
    sx, _ = p.station
    parts.append(
        _box(
            f'{k}_station_marker',
            (sx, y + hw + 0.015, p.top + 0.0055),
            (0.01, 0.015, 0.0005),
            _VISUAL,
            _MARKER_RGBA,
        )
    )
    if p.table is not None:
        t = p.table
        base_h = (t.top - p.deck_thickness - 0.001) / 2.0
        parts.append(
            _box(
                'pick_table_base',
                (t.centre[0], t.centre[1], base_h),
                (t.half_size[0], t.half_size[1], base_h),
                _SOLID,
                '0.45 0.47 0.50 1',
            )
        )
        parts.append(
            _deck_body(
                'pick_table',
                (t.centre[0], t.centre[1], t.top - dz),
                (t.half_size[0], t.half_size[1], dz),
                t.friction,
            )
        )
    # Elevator: a platform on a vertical slide with powered rollers, driven kinematically.
    x0, x1 = p.platform_x
    parts.append(
        f'<body name="{k}_elevator" pos="{(x0 + x1) / 2:.6g} {y:.6g} {p.lower_height - dz:.6g}">'
        f'<joint name="{k}_elevator_lift" type="slide" axis="0 0 1" armature="1000" damping="0"/>'
        f'<joint name="{k}_elevator_drive" type="slide" axis="1 0 0" armature="1000" damping="0"/>'
        + _box(
            f'{k}_elevator_platform',
            (0.0, 0.0, 0.0),
            ((x1 - x0) / 2, pw, dz),
            _SOLID,
            _FRAME_RGBA,
            _fric(p.friction) + ' mass="20"',
        )
        + '</body>'
    )
    for side in (-1.0, 1.0):
        parts.append(
            _box(
                None,
                (x0 - 0.03, y + side * (pw + 0.04), p.store_height / 2),
                (0.03, 0.03, p.store_height / 2),
                _VISUAL,
                _FRAME_RGBA,
            )
        )
    # Store: a queue belt and a metering infeed belt, inside an opaque non-colliding box.
    floor_z = p.lower_height - dz
    qx0, qx1 = store_x0, p.queue_end
    parts.append(
        _deck_body(
            f'{k}_store_queue',
            ((qx0 + qx1) / 2, y, floor_z),
            ((qx1 - qx0) / 2, pw, dz),
            p.friction,
        )
    )
    ix0, ix1 = p.infeed_x
    parts.append(
        _deck_body(
            f'{k}_infeed', ((ix0 + ix1) / 2, y, floor_z), ((ix1 - ix0) / 2, pw, dz), p.friction
        )
    )
    plinth = (p.lower_height - p.deck_thickness - 0.002) / 2.0
    parts.append(
        _box(
            f'{k}_store_plinth',
            ((qx0 + ix1) / 2, y, plinth),
            ((ix1 - qx0) / 2, pw, plinth),
            _VISUAL,
            _DECK_RGBA,
        )
    )
    parts.append(_black_box_xml(p, kind, store_x0, tallest))
    return ''.join(parts)


def _black_box_xml(p: LineParams, kind: str, store_x0: float, tallest: float) -> str:
    """The opaque store: roof, sides, back and a front face with a mouth for the belt."""
    k = kind
    y = p.belt_y
    wall = 0.05
    bx0 = store_x0 - wall
    bx1 = p.mouth_x
    hy = p.platform_width / 2.0 + p.store_margin
    h = p.store_height
    mouth_w = p.belt_width / 2.0 + 0.02  # docs/levels.md §2.3: just wider than the belt
    mouth_top = p.lower_height + tallest + 0.05
    cx = (bx0 + bx1) / 2.0
    lx = (bx1 - bx0) / 2.0
    g = [_box(f'{k}_store_roof', (cx, y, h - wall / 2), (lx, hy, wall / 2), _VISUAL, _STORE_RGBA)]
    for side, tag in ((-1.0, 'right'), (1.0, 'left')):
        g.append(
            _box(
                f'{k}_store_{tag}',
                (cx, y + side * (hy - wall / 2), h / 2),
                (lx, wall / 2, h / 2),
                _VISUAL,
                _STORE_RGBA,
            )
        )
    g.append(
        _box(
            f'{k}_store_back',
            (bx0 + wall / 2, y, h / 2),
            (wall / 2, hy, h / 2),
            _VISUAL,
            _STORE_RGBA,
        )
    )
    fx = bx1 - wall / 2
    side_w = (hy - mouth_w) / 2.0
    for side in (-1.0, 1.0):
        g.append(
            _box(
                None,
                (fx, y + side * (mouth_w + side_w), h / 2),
                (wall / 2, side_w, h / 2),
                _VISUAL,
                _STORE_RGBA,
            )
        )
    g.append(
        _box(
            None,
            (fx, y, (mouth_top + h) / 2),
            (wall / 2, mouth_w, (h - mouth_top) / 2),
            _VISUAL,
            _STORE_RGBA,
        )
    )
    return ''.join(g)


def line_cartons_xml(draws: Sequence[CartonLike], stages: Mapping[int, Stage]) -> str:
    """Every carton parked in the store (staging happens here, at build time)."""
    return ''.join(
        carton_body_xml(d, stages[d.index].pos, yaw_quat(stages[d.index].yaw)) for d in draws
    )
