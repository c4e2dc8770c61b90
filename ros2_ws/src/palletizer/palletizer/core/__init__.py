"""palletizer.core."""
