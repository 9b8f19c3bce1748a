"""Watchers: the files a job writes (logs, progress, metrics) become the observations the rules consume."""
