"""What the client, the workflows and the activities send one another: workflow and
activity inputs and results, approval decisions and their signatures, live events, and
the limiter's and the evals' shared rules.

Pure (no temporalio, no HTTP client). Import each name from the module that defines it,
so that a process loads only what it uses.

Its modules:

- ``boundary``: activity inputs and results, signals, query answers.
- ``approvals``: decisions, grants, signed tokens and what they are signed for.
- ``events``: a session's live events, as a reader sees them.
- ``capacity``: the limiter's book: who holds an endpoint's capacity, who waits.
- ``evals``: evaluation cases, runs and reports, and scoring a case."""
