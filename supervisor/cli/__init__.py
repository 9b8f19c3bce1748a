"""The `shepherd` command: one module per group of verbs, all calling the code the daemon and Slack use."""
