"""Small runnable programs built on durable-agent; each is run by the test suite
(tests/project/test_examples.py) against a scripted model."""
