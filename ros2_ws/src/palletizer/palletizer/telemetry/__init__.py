"""palletizer.telemetry."""
