"""palletizer.nodes."""
