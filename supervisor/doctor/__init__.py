"""`shepherd doctor`: the environment checked in one table with a fix for each problem; pure judgements
(`checks.py`) over what the probes (`probes.py`, the only I/O) found."""
