"""The worker process, as a script beside the project: ``python worker.py --dev``.

A thin door onto :mod:`durable_agent.worker` (what ``durable-agent worker`` runs too);
the installed package carries everything, so nothing here is installed.
"""

from durable_agent.worker import main

if __name__ == "__main__":
    main()
