"""palletizer.panel."""
