"""The loops that move data between the stages, and the one place that builds them."""
