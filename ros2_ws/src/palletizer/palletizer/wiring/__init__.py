"""Wiring of the episode ports to the simulated cell: oracle stubs, referee, in-process runs."""

from palletizer.wiring.oracles import OracleDetector, OracleGauge, OracleHeightMap, Referee

__all__ = ['OracleDetector', 'OracleGauge', 'OracleHeightMap', 'Referee']
