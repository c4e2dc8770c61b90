"""`python -m palletizer.cli.moveit_config`: write (or check) the SRDF of palletizer_moveit_config
from the published robot description, its disabled collision pairs found by sampling as MoveIt's
setup assistant finds them (docs/moveit.md).

    python -m palletizer.cli.moveit_config           # rewrite config/ur10e_palletizer.{srdf,urdf}
    python -m palletizer.cli.moveit_config --check   # exit 1 if a committed file differs

The package also carries a copy of /robot_description (config/ur10e_palletizer.urdf) for
moveit_configs_utils, which loads the robot description from a file.

The URDF's own collision geometry (core/description.py robot_description) is loaded into MuJoCo,
which checks every pair of links at the default state and at `samples` random joint angles
within the URDF's limits (seeded, so the file is reproducible):
- Adjacent: parent and child links, where links without collision geometry (flange, tool0...)
  are passed through;
- Default: in collision at the default state (all joints 0);
- Always: in collision in at least ALWAYS_FRACTION of the samples;
- Never: in collision in none of them.
Pairs that collide only sometimes stay checked.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from palletizer.core.config import load_config
from palletizer.core.description import JOINTS, robot_description
from palletizer.core.errors import InvalidValue

__all__ = [
    'ALWAYS_FRACTION',
    'GROUP',
    'SAMPLES',
    'SEED',
    'SRDF_PATH',
    'URDF_PATH',
    'DisabledPair',
    'disabled_pairs',
    'main',
    'published_urdf',
    'srdf',
]

# The setup assistant's defaults: 10,000 random states; "always" at 95 % of them.
SAMPLES = 10_000
ALWAYS_FRACTION = 0.95
SEED = 0
# ur_moveit_config's group name (`<name>_manipulator` with name ur), the chain base_link -> tool0.
GROUP = 'ur_manipulator'
EE_GROUP = 'gripper'
SRDF_PATH = (
    Path(__file__).resolve().parents[3]
    / 'palletizer_moveit_config'
    / 'config'
    / 'ur10e_palletizer.srdf'
)
URDF_PATH = SRDF_PATH.with_suffix('.urdf')


@dataclass(frozen=True)
class DisabledPair:
    """A pair of links MoveIt need not check, and why (the setup assistant's reasons)."""

    link1: str
    link2: str
    reason: str


def _model(urdf: str) -> mujoco.MjModel:
    """The URDF's collision geometry in MuJoCo, one body per link (no fusing of fixed links),
    every geom able to touch every other, parent and child included."""
    text = urdf.replace(
        '<robot name="ur10e_palletizer">',
        '<robot name="ur10e_palletizer"><mujoco><compiler fusestatic="false" '
        'discardvisual="true"/></mujoco>',
        1,
    )
    spec = mujoco.MjSpec.from_string(text)
    spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
    for g in spec.geoms:
        g.contype, g.conaffinity, g.margin, g.gap = 1, 1, 0.0, 0.0
    return spec.compile()


def _adjacent(urdf: str, with_geometry: set[str]) -> set[frozenset[str]]:
    """Links joined by a joint, passing through links without collision geometry."""
    root = ET.fromstring(urdf)
    edges: dict[str, set[str]] = {el.get('name', ''): set() for el in root.iter('link')}
    for j in root.iter('joint'):
        parent = j.find('parent')
        child = j.find('child')
        if parent is None or child is None:
            raise InvalidValue(f'URDF joint {j.get("name")!r} lacks its parent or child link')
        a, b = parent.get('link', ''), child.get('link', '')
        edges[a].add(b)
        edges[b].add(a)
    out: set[frozenset[str]] = set()
    for link in sorted(with_geometry):
        seen, todo = {link}, [link]
        while todo:  # walk through geometry-less links to the nearest ones with geometry
            for n in edges[todo.pop()]:
                if n in seen:
                    continue
                seen.add(n)
                if n in with_geometry:
                    out.add(frozenset((link, n)))
                else:
                    todo.append(n)
    return out


def _colliding(m: mujoco.MjModel, d: mujoco.MjData) -> set[tuple[str, str]]:
    """The pairs of links (names sorted) in contact at d.qpos."""
    mujoco.mj_kinematics(m, d)
    mujoco.mj_collision(m, d)
    if d.ncon == 0:
        return set()
    a = m.geom_bodyid[d.contact.geom1[: d.ncon]]
    b = m.geom_bodyid[d.contact.geom2[: d.ncon]]
    out = set()
    for i, j in set(zip(a.tolist(), b.tolist(), strict=True)):
        if i != j:
            x, y = m.body(i).name, m.body(j).name
            out.add((min(x, y), max(x, y)))
    return out


def disabled_pairs(
    urdf: str,
    lower: Sequence[float],
    upper: Sequence[float],
    samples: int = SAMPLES,
    seed: int = SEED,
) -> list[DisabledPair]:
    """The setup assistant's disabled collision pairs of `urdf`, sampling `samples` joint
    vectors uniformly within [lower, upper] [rad] (JOINTS order) with a seeded RNG."""
    m = _model(urdf)
    d = mujoco.MjData(m)
    links = {m.body(int(m.geom_bodyid[g])).name for g in range(m.ngeom)}
    pairs = list(itertools.combinations(sorted(links), 2))
    adr = [int(m.joint(j).qposadr[0]) for j in JOINTS]
    out: dict[tuple[str, str], str] = {}
    for edge in _adjacent(urdf, links):
        a, b = sorted(edge)
        out[(a, b)] = 'Adjacent'
    # MuJoCo never checks bodies welded together; every such pair must be adjacent.
    for a, b in pairs:
        welded = m.body_weldid[m.body(a).id] == m.body_weldid[m.body(b).id]
        if welded and (a, b) not in out:
            raise InvalidValue(f'links {a} and {b} are rigidly joined but not adjacent')
    d.qpos[:] = 0.0
    for p in _colliding(m, d):
        out.setdefault(p, 'Default')
    rng = np.random.default_rng(seed)
    counts: dict[tuple[str, str], int] = dict.fromkeys(pairs, 0)
    for q in rng.uniform(np.asarray(lower), np.asarray(upper), size=(samples, len(JOINTS))):
        d.qpos[adr] = q
        for p in _colliding(m, d):
            counts[p] += 1
    for p, n in counts.items():
        if p in out:
            continue
        if n >= ALWAYS_FRACTION * samples:
            out[p] = 'Always'
        elif n == 0:
            out[p] = 'Never'
    return [DisabledPair(a, b, r) for (a, b), r in sorted(out.items())]


def srdf(samples: int = SAMPLES, seed: int = SEED) -> str:
    """The SRDF of palletizer_moveit_config from configs/cell.yaml's robot and gripper."""
    cell = load_config().cell
    urdf = robot_description(cell.robot, cell.gripper)
    pairs = disabled_pairs(urdf, cell.robot.joint_lower, cell.robot.joint_upper, samples, seed)
    lines = [
        '<?xml version="1.0"?>',
        '<!-- Written by `python -m palletizer.cli.moveit_config` from /robot_description',
        f'     (configs/cell.yaml); collision pairs from {samples} seeded samples (seed {seed}),',
        '     docs/moveit.md. Do not edit by hand: rerun the command. -->',
        '<robot name="ur10e_palletizer">',
        f'  <group name="{GROUP}">',
        '    <chain base_link="base_link" tip_link="tool0"/>',
        '  </group>',
        f'  <group name="{EE_GROUP}">',
        '    <link name="gripper"/>',
        '    <link name="tcp"/>',
        '  </group>',
    ]
    for state, q in (('home', cell.robot.home), ('rest', cell.robot.rest)):
        lines.append(f'  <group_state name="{state}" group="{GROUP}">')
        lines += [f'    <joint name="{j}" value="{v}"/>' for j, v in zip(JOINTS, q, strict=True)]
        lines.append('  </group_state>')
    lines += [
        f'  <end_effector name="vgp20" parent_link="tool0" group="{EE_GROUP}" '
        f'parent_group="{GROUP}"/>',
        '  <virtual_joint name="virtual_joint" type="fixed" parent_frame="world" '
        'child_link="base_link"/>',
    ]
    lines += [
        f'  <disable_collisions link1="{p.link1}" link2="{p.link2}" reason="{p.reason}"/>'
        for p in pairs
    ]
    lines.append('</robot>')
    return '\n'.join(lines) + '\n'


def published_urdf() -> str:
    """/robot_description from configs/cell.yaml, as the state publisher sends it."""
    cell = load_config().cell
    return robot_description(cell.robot, cell.gripper)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog='python -m palletizer.cli.moveit_config', description=__doc__
    )
    ap.add_argument('--check', action='store_true', help='compare, do not write; exit 1 on a diff')
    ap.add_argument(
        '--output', type=Path, default=SRDF_PATH, help='the SRDF file (the URDF beside)'
    )
    args = ap.parse_args(argv)
    files = {args.output: srdf(), args.output.with_suffix('.urdf'): published_urdf()}
    stale = 0
    for path, text in files.items():
        if args.check:
            same = path.is_file() and path.read_text() == text
            stale += not same
            print(f'{path}: {"up to date" if same else "differs from the generator"}')
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f'wrote {path}')
    return 1 if stale else 0


if __name__ == '__main__':
    sys.exit(main())
