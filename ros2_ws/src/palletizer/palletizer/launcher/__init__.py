"""palletizer.launcher."""
