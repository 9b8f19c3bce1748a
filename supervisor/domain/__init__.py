"""The vocabulary every stage speaks: job states, observations, runs and attempts, the spec, notices."""
