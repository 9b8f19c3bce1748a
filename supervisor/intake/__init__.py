"""Spec files dropped into the queue folder become claimed runs (or rejected files with their reasons)."""
