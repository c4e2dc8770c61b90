"""palletizer."""
