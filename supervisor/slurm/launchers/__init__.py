"""Batch scripts Shepherd submits through, each with the file layout its jobs write."""
