"""What the client, the workflows and the activities send one another: workflow and
activity inputs and results, approval decisions and their signatures, live events, and
the limiter's and the evals' shared rules.

Pure (no temporalio, no HTTP client). Import each name from the module that defines it,
so that a process loads only what it uses."""
