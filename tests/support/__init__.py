"""Helpers of the test suite: harnesses, fixtures, servers on 127.0.0.1 and tool modules
that worker processes load by name."""
