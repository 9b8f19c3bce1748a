"""Watchers: turn files a job writes into the typed events the rules engine consumes (docs/watching.md)."""
