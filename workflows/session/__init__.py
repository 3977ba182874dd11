"""The session's pure core: every rule of the turn loop, without Temporal.

``Session`` (in ``core``) is the single decision point; it is made of collaborators with
one job each: the tool batch (``batch``: slots, the gate, run groups, results), people's
decisions (``decisions``), budgets (``budget``), rescue of unusable replies (``rescue``)
and the swarm (``swarm``). ``state`` is what continue-as-new carries; ``commands`` is
what the Session asks the workflow to do. Nothing here imports temporalio, reads a
clock or does I/O: times are given, so the same events give the same commands.
"""
