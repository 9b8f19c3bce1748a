"""Slack: a thread per run from a SQLite outbox, Block Kit alerts, and authorised commands.

Entry points for the daemon: `service.build_slack(db, settings, control)` -> `SlackService`
(its `.notifier` for synchronous calls, `.run()` as a task); `schema.SLACK_SCHEMA_SQL` for
the store's migration; `control.RunControl` for what commands dispatch to.
"""
