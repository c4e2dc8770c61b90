"""ament_python build of the palletizer package (colcon build / pip install)."""

from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = 'palletizer'
HERE = Path(__file__).resolve().parent

# The node executables: one console script per node module under palletizer/nodes.
NODES = [
    'cell_bridge',
    'depth_fusion',
    'wrist_gauge',
    'planner',
    'trajectory_executor',
    'episode_director',
    'telemetry',
    'state_publisher',
    'foxglove_bridge',
    'viz_markers',
]


def _share(folder: str) -> list[tuple[str, list[str]]]:
    """Install launch/, configs/, rviz/ and sql/ (symlinked from the repository root) into share/."""
    root = HERE / folder
    files = sorted(p for p in root.rglob('*') if p.is_file() and '__pycache__' not in p.parts)
    groups: dict[str, list[str]] = {}
    for f in files:
        rel = f.relative_to(HERE)
        groups.setdefault(str(Path('share', PACKAGE, rel.parent)), []).append(str(rel))
    return sorted(groups.items())


setup(
    name=PACKAGE,
    version='0.1.0',
    packages=find_packages(include=[PACKAGE, f'{PACKAGE}.*']),
    # The robot's MJCF files (sim/models/: ur10e.xml, vgp20.xml), read at run time.
    package_data={f'{PACKAGE}.sim': ['models/*.xml']},
    data_files=[
        ('share/ament_index/resource_index/packages', [f'resource/{PACKAGE}']),
        (f'share/{PACKAGE}', ['package.xml']),
        *_share('launch'),
        *_share('configs'),
        *_share('rviz'),
        *_share('sql'),
    ],
    install_requires=['setuptools'],
    zip_safe=True,
    maintainer='palletizer maintainers',
    maintainer_email='maintainers@palletizer.dev',
    description='Closed-loop robotic palletizing in MuJoCo on ROS 2 Jazzy.',
    license='Apache-2.0',
    entry_points={
        'console_scripts': [f'{n} = {PACKAGE}.nodes.{n}:main' for n in NODES]
        + [
            f'palletize = {PACKAGE}.cli.palletize:main',
            f'launch_graph = {PACKAGE}.launcher.__main__:main',
        ],
    },
)
