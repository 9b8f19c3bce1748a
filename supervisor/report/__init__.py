"""What every failure cost: a run's wall-clock and GPU-hours split by phase, read from the store (`read.py`)
and computed by one pure model (`costs.py`) that the report, the picture, the metrics and the benchmark
share."""
