"""What people are told about runs: sinks, plots, silences; Slack is one outlet."""
