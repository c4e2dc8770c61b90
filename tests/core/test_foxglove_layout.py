"""The Foxglove layout in the repository: built by the code, and every topic and field it shows is
one the bridge serves."""

from __future__ import annotations

import json
import re
from pathlib import Path

from palletizer.nodes.foxglove_bridge import DEFAULT_TOPICS
from palletizer.nodes.foxglove_layout import layout_json
from palletizer.telemetry import load_typestore

ROOT = Path(__file__).resolve().parents[2]
FILE = ROOT / 'foxglove' / 'palletizer.json'


def _strings(node):
    if isinstance(node, dict):
        for k, v in node.items():
            yield k
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)
    elif isinstance(node, str):
        yield node


def test_the_committed_layout_is_the_one_the_code_builds():
    assert FILE.read_text() == layout_json(), (
        'foxglove/palletizer.json is stale: python -m palletizer.nodes.foxglove_layout > '
        'foxglove/palletizer.json'
    )


def test_every_topic_and_plotted_field_of_the_layout_is_served():
    doc = json.loads(FILE.read_text())
    shown = {s.split('.')[0] for s in _strings(doc) if s.startswith('/')}
    assert shown and shown <= set(DEFAULT_TOPICS), shown - set(DEFAULT_TOPICS)
    types = load_typestore()
    state, _ = types.generate_msgdef('palletizer_msgs/msg/PalletState', ros_version=2)
    fields = set(re.findall(r'^\S+ (\w+)', state.split('=' * 10)[0], re.M))
    plotted = [s for s in _strings(doc) if s.startswith('/palletizer/pallet_states.')]
    assert plotted
    for path in plotted:
        assert path.split('.', 1)[1] in fields, path
