"""Stand-ins for outside services (Slack) that tests and the demo run on loopback; never the daemon."""
