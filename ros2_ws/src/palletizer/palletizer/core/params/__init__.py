"""Parameter records that core/config builds at load and the core modules read.

They import nothing from core but its errors, so core/config can build them without loading
the planners, the detector or the fusion (ARCHITECTURE §6: no import runs upward).
"""
