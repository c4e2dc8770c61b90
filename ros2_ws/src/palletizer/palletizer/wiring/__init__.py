"""Wiring of the episode ports to the simulated cell: oracle stubs, referee, in-process runs."""

from palletizer.core.gauge import OracleGauge
from palletizer.wiring.oracles import OracleDetector, OracleHeightMap, Referee

__all__ = ['OracleDetector', 'OracleGauge', 'OracleHeightMap', 'Referee']
