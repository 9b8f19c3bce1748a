"""A spec checked against the cluster before it is queued, so a bad path or request fails in seconds, not
after hours in the queue: pure judgements (`checks.py`) over facts gathered in bounded time (`probe.py`)."""
