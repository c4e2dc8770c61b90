"""scripts/fetch-ros-sources: the pinned upstream packages are laid out only from sources whose
checksums match msgs/upstream-sources.tsv, and what scripts/setup built from them works."""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import importlib.util
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / 'scripts' / 'fetch-ros-sources'
SHARED = ROOT.parent / 'shared' / 'ros-sources'


def _module():
    """scripts/fetch-ros-sources as a module (its dataclasses need it in sys.modules)."""
    if 'fetch_ros_sources' not in sys.modules:
        loader = importlib.machinery.SourceFileLoader('fetch_ros_sources', str(SCRIPT))
        spec = importlib.util.spec_from_loader('fetch_ros_sources', loader)
        mod = importlib.util.module_from_spec(spec)
        sys.modules['fetch_ros_sources'] = mod
        loader.exec_module(mod)
    return sys.modules['fetch_ros_sources']


def _sources() -> Path:
    env = os.environ.get('PALLETIZER_ROS_SOURCES')
    path = Path(env) if env else SHARED
    if not (path / 'SHA256SUMS').is_file():
        pytest.skip(f'no folder of the pinned archives at {path} (set PALLETIZER_ROS_SOURCES)')
    return path


def _run(*args: str, sources: Path | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != 'PALLETIZER_ROS_SOURCES'}
    if sources is not None:
        env['PALLETIZER_ROS_SOURCES'] = str(sources)
    return subprocess.run(
        [str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_lock_pins_every_package_setup_builds_with_a_commit_and_checksums():
    pins = _module().read_lock()
    assert set(pins) == {
        'tf2', 'tf2_msgs', 'tf2_py', 'tf2_ros_py', 'control_msgs', 'ur_msgs',
        'ur_dashboard_msgs', 'moveit_msgs', 'object_recognition_msgs', 'octomap_msgs',
    }  # fmt: skip
    for pin in pins.values():
        assert len(pin.commit) == 40 and int(pin.commit, 16) >= 0
        assert len(pin.archive_sha256) == 64 and len(pin.tree_sha256) == 64


def test_the_pinned_archives_match_the_shared_checksums():
    sums = dict(
        reversed(line.split()) for line in (_sources() / 'SHA256SUMS').read_text().splitlines()
    )
    for pin in _module().read_lock().values():
        assert sums[pin.archive] == pin.archive_sha256, pin.package


def test_a_package_is_laid_out_from_its_archive_with_the_pinned_tree(tmp_path):
    out = _run(str(tmp_path / 'src'), 'ur_msgs', sources=_sources())
    assert out.returncode == 0, out.stderr
    assert 'checksums match' in out.stderr
    assert (tmp_path / 'src' / 'ur_msgs' / 'srv' / 'SetIO.srv').is_file()
    pin = _module().read_lock()['ur_msgs']
    assert _module().tree_sha256(tmp_path / 'src' / 'ur_msgs') == pin.tree_sha256


def test_an_archive_whose_checksum_differs_is_refused(tmp_path):
    pin = _module().read_lock()['ur_msgs']
    bad = tmp_path / 'sources'
    bad.mkdir()
    data = (_sources() / pin.archive).read_bytes()
    (bad / pin.archive).write_bytes(data + b'\0')
    out = _run(str(tmp_path / 'src'), 'ur_msgs', sources=bad)
    assert out.returncode == 1
    assert 'not the pinned archive' in out.stderr and pin.archive_sha256 in out.stderr
    assert not (tmp_path / 'src' / 'ur_msgs').exists()


def test_a_tree_that_differs_from_the_pin_is_refused(tmp_path, monkeypatch):
    mod = _module()
    # An archive of the right shape whose checksum we pin, holding a file upstream lacks.
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w:gz') as tar:
        body = b'<package/>\n'
        info = tarfile.TarInfo('pkg-1/x/package.xml')
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    (tmp_path / 'x.tar.gz').write_bytes(buf.getvalue())
    pin = mod.Pin(
        'x', 'x.tar.gz', hashlib.sha256(buf.getvalue()).hexdigest(), 'o/x', '0' * 40,
        'pkg-1', 'x', '1' * 64,
    )  # fmt: skip
    monkeypatch.setattr(mod, 'read_lock', lambda: {'x': pin})
    with pytest.raises(mod.FetchError, match='tree SHA-256 .* the source differs'):
        mod.fetch(tmp_path / 'src', ['x'], tmp_path)


def test_tree_hash_is_the_documented_shell_pipeline(tmp_path):
    (tmp_path / 'a' / 'b').mkdir(parents=True)
    (tmp_path / 'a' / 'b' / 'z.txt').write_text('z\n')
    (tmp_path / 'a' / 'B.txt').write_text('capital\n')
    (tmp_path / 'a' / 'c').write_bytes(b'\x00\x01')
    shell = subprocess.run(
        'cd a && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum',
        shell=True, cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout.split()[0]  # fmt: skip
    assert _module().tree_sha256(tmp_path / 'a') == shell


def test_an_unknown_package_and_a_missing_folder_are_named(tmp_path):
    out = _run(str(tmp_path), 'nav2_msgs', sources=_sources())
    assert out.returncode == 1 and 'nav2_msgs' in out.stderr and 'pinned: tf2' in out.stderr
    out = _run(str(tmp_path), 'ur_msgs', sources=tmp_path / 'nowhere')
    assert out.returncode == 2 and 'is not a folder' in out.stderr


def test_the_built_tf2_ros_buffer_looks_up_a_static_frame():
    from geometry_msgs.msg import TransformStamped
    from rclpy.time import Time
    from tf2_ros import Buffer

    buf = Buffer()
    t = TransformStamped()
    t.header.frame_id, t.child_frame_id = 'world', 'cam_optical'
    t.transform.translation.z, t.transform.rotation.w = 1.5, 1.0
    buf.set_transform_static(t, 'test')
    got = buf.lookup_transform('world', 'cam_optical', Time())
    assert got.transform.translation.z == pytest.approx(1.5)
    assert not buf.can_transform('world', 'tool0', Time())


def test_moveit_and_ur_dashboard_interfaces_import():
    from moveit_msgs.msg import DisplayTrajectory, PlanningScene
    from ur_dashboard_msgs.srv import GetRobotMode

    assert PlanningScene().is_diff is False
    assert DisplayTrajectory().model_id == ''
    assert hasattr(GetRobotMode.Response(), 'robot_mode')


def _laid_out(tmp_path: Path, name: str) -> Path:
    """The package's pinned source: the setup's layout where it built from source, else laid
    out from the archives."""
    built = ROOT / 'ros2_ws' / 'upstream' / 'src' / name
    if built.is_dir():
        return built
    out = _run(str(tmp_path / 'src'), name, sources=_sources())
    assert out.returncode == 0, out.stderr
    return tmp_path / 'src' / name


def test_a_subset_is_its_interfaces_and_the_messages_they_are_made_of(tmp_path):
    mod = _module()
    pkg = _laid_out(tmp_path, 'moveit_msgs')
    files = mod.closure(pkg, ['msg/PlanningScene.msg', 'msg/DisplayTrajectory.msg'])
    # PlanningScene -> RobotState -> AttachedCollisionObject -> CollisionObject, and the world.
    for need in ('RobotState', 'AttachedCollisionObject', 'CollisionObject', 'PlanningSceneWorld',
                 'AllowedCollisionMatrix', 'RobotTrajectory', 'ObjectColor'):  # fmt: skip
        assert f'msg/{need}.msg' in files
    assert 'msg/MotionPlanRequest.msg' not in files and len(files) < 20
    with pytest.raises(mod.FetchError, match='moveit_msgs has no msg/Nope.msg'):
        mod.closure(pkg, ['msg/Nope.msg'])
    args = mod.cmake_args(pkg.parent)
    assert f'-DCMAKE_PROJECT_moveit_msgs_INCLUDE={ROOT}/msgs/interface-subset.cmake' in args
    assert '-DPALLETIZER_INTERFACES_moveit_msgs=' + ';'.join(files) in args


def _imported(path: Path) -> set[tuple[str, str, str]]:
    """(package, kind, type) of every `from <package>.<msg|srv|action> import ...` in a file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.count('.') == 1:
            pkg, kind = node.module.split('.')
            if kind in ('msg', 'srv', 'action'):
                out |= {(pkg, kind, a.name) for a in node.names}
    return out


def test_every_type_the_code_imports_from_a_subset_package_is_built(tmp_path):
    mod = _module()
    subsets = mod.read_subsets()
    used: dict[str, set[str]] = {name: set() for name in subsets}
    code = [
        *(ROOT / 'ros2_ws' / 'src' / 'palletizer').rglob('*.py'),
        *(ROOT / 'tests').rglob('*.py'),
    ]
    for path in code:
        if 'node_modules' in path.parts:
            continue
        for pkg, kind, name in _imported(path):
            if pkg in used:
                used[pkg].add(f'{kind}/{name}.{kind}')
    assert used['moveit_msgs'] >= {'msg/PlanningScene.msg', 'msg/AttachedCollisionObject.msg'}
    for name, roots in subsets.items():
        built = set(mod.closure(_laid_out(tmp_path, name), roots))
        assert used[name] <= built, (
            f'{sorted(used[name] - built)} used but not in msgs/upstream-interfaces.tsv'
        )


def test_the_subsets_hold_what_they_use_of_each_other(tmp_path):
    """moveit_msgs' PlanningScene is made of object_recognition_msgs' ObjectType and
    octomap_msgs' OctomapWithPose: a subset of those must hold them."""
    mod = _module()
    subsets = mod.read_subsets()
    built = {n: set(mod.closure(_laid_out(tmp_path, n), r)) for n, r in subsets.items()}
    crossing = set()
    for name, files in built.items():
        for rel in files:
            for owner, typ in mod.field_types(_laid_out(tmp_path, name) / rel):
                if owner in built and owner != name:
                    crossing.add((owner, f'msg/{typ}.msg'))
    assert ('object_recognition_msgs', 'msg/ObjectType.msg') in crossing
    missing = [(o, f) for o, f in crossing if f not in built[o]]
    assert not missing, f'{missing} used across packages but not built'
