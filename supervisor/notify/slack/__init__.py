"""Slack, one outlet of notify: a thread per run from a SQLite outbox, Block Kit alerts, authorised commands.

Entry points for the daemon: `service.build_slack(db, settings, control)` -> `SlackService`
(its `.notifier` for synchronous calls, `.run()` as a task); commands dispatch to
`supervisor.ports.RunControl`.
"""
