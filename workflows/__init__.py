"""Deterministic orchestration only: no I/O, clock, randomness or threads."""
