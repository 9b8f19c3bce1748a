"""Slack, one outlet of notify: a thread per run from a SQLite outbox, Block Kit alerts, authorised commands.

Entry points for the daemon: `service.SlackOutbox` (the notifier for synchronous calls and the sender),
then `service.SlackService(outbox, control)` whose `.run()` is a task; commands dispatch to
`supervisor.ports.RunControl`.
"""
