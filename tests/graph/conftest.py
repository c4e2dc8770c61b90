"""Graph tests need root (network namespaces) and the interface build from scripts/setup."""

from __future__ import annotations

import importlib.util

import pytest

from tests.graph.isolation import can_isolate


def pytest_collection_modifyitems(config, items):
    reason = can_isolate()
    if importlib.util.find_spec('palletizer_msgs') is None:
        reason = (
            reason or 'palletizer_msgs is not built: run scripts/setup and source scripts/env.sh'
        )
    for item in items:
        if 'tests/graph' in str(item.fspath).replace('\\', '/'):
            item.add_marker(pytest.mark.graph)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
