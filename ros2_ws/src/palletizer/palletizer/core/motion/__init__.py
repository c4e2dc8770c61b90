"""palletizer.core.motion."""
