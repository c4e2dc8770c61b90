"""palletizer.cli."""
