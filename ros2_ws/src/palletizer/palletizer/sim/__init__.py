"""palletizer.sim."""
