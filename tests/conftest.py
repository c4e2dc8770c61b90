"""Options for the whole suite: `--run-slow` runs the tests marked slow (long physical runs that
repeat what a faster test in the default run already covers)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        '--run-slow',
        action='store_true',
        default=False,
        help='also run the tests marked slow (long physical runs; see docs/testing.md)',
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption('--run-slow'):
        return
    skip = pytest.mark.skip(reason='slow: a long physical run, opt in with --run-slow')
    for item in items:
        if 'slow' in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _frozen_load_table_restored():
    """A test that installs a frozen load table in this process (as a benchmark worker does)
    leaves the process as it found it."""
    from palletizer.core import loads

    before = loads.frozen_table()
    yield
    loads.set_frozen_table(before)
