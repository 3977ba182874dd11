"""Benchmarks: durable-agent against a minimal hand-written Temporal agent loop."""
