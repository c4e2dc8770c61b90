"""palletizer.core.planning."""
