"""Where the benchmark's model listens, for a peer whose agents are built when their
module is imported (the workflow sandbox imports it again for every run)."""

import os

BASE_URL = os.environ.get("BENCH_PEER_BASE_URL", "http://127.0.0.1:9/v1")
