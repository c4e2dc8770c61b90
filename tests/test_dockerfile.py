"""docker/Dockerfile cannot be built here (no Docker engine, no registry); what can be checked
without one is held here: the base image, that apt brings every upstream package that
scripts/setup otherwise builds from source plus moveit_py and the UR driver, and that colcon
builds the workspace's packages from a copy without a host's build outputs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / 'docker' / 'Dockerfile').read_text()


def _apt_packages() -> set[str]:
    text = DOCKERFILE.replace('\\\n', ' ')
    found: set[str] = set()
    for line in text.splitlines():
        if 'apt-get install' in line:
            found |= set(re.findall(r'\bros-jazzy-[a-z0-9-]+', line))
    return found


def _upstream() -> list[str]:
    lines = (ROOT / 'msgs' / 'upstream-sources.tsv').read_text().splitlines()
    return [ln.split('\t')[0] for ln in lines if ln and not ln.startswith('#')]


def test_the_image_is_jazzy_with_moveit_py_and_the_ur_driver():
    assert re.search(r'^FROM ros:jazzy(\s|$)', DOCKERFILE, re.M)
    apt = _apt_packages()
    assert {'ros-jazzy-moveit-py', 'ros-jazzy-ur-robot-driver', 'ros-jazzy-ur-description'} <= apt


def test_apt_brings_every_package_scripts_setup_would_build_from_source():
    upstream = _upstream()
    assert len(upstream) >= 10
    missing = [p for p in upstream if f'ros-jazzy-{p.replace("_", "-")}' not in _apt_packages()]
    assert not missing, f'docker/Dockerfile does not install {missing}'


def test_colcon_builds_the_workspace_packages_from_a_clean_copy():
    assert 'pip3 install --break-system-packages -r requirements-ros.txt' in DOCKERFILE
    assert (ROOT / 'requirements-ros.txt').is_file()
    build = next(ln for ln in DOCKERFILE.replace('\\\n', ' ').splitlines() if 'colcon build' in ln)
    assert 'cd ros2_ws' in build and '--base-paths src' in build and 'BUILD_TESTING=OFF' in build
    for pkg in ('palletizer', 'palletizer_msgs', 'palletizer_moveit_config'):
        assert (ROOT / 'ros2_ws' / 'src' / pkg / 'package.xml').is_file(), pkg
    ignored = (ROOT / '.dockerignore').read_text().splitlines()
    for out in (
        'ros2_ws/build/',
        'ros2_ws/install/',
        'ros2_ws/log/',
        'ros2_ws/upstream/',
        '.venv/',
    ):
        assert out in ignored, f'.dockerignore lets {out} into the image'
