"""Decisions become effects through the ports (cancel, resume, hold, give up); people's commands too."""
