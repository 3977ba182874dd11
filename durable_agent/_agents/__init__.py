"""Agents written in Python: an ``Agent`` with its tools and output type, and agents loaded
from the owner's modules.

Import each name from the module that defines it: a process loads only what it uses."""
