"""Observations in, matches out: YAML rules compiled once and matched by a pure engine (docs/rules.md)."""
