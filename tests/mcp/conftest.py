"""The MCP server's tests: a Cell writing to the test's own runs folder, and an in-memory MCP
client session (the SDK's in-process transport) on the server built over it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from mcp import Client
from palletizer.cli.mcp_cell import Cell
from palletizer.cli.mcp_server import build_server


@pytest.fixture
def cell(tmp_path):
    c = Cell(tmp_path, tmp_path / 'runs')
    yield c
    c.close()


@asynccontextmanager
async def connected(cell: Cell) -> AsyncIterator[Client]:
    """An MCP client session on the server over `cell`, in memory."""
    async with Client(build_server(cell)) as client:
        yield client
