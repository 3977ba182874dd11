"""The worker process, as a script beside the project: ``python worker.py --dev``.

A thin entry point onto ``durable-agent worker`` (the same arguments); the installed package
carries everything, so nothing here is installed.
"""

from durable_agent._cli.worker import main

if __name__ == "__main__":
    main()
