"""SIGHUP or a changed rules file reloads the rules; a bad file keeps the old ones in force and alerts."""

from pathlib import Path

import anyio

from supervisor.daemon.compose import build
from supervisor.domain.notices import Notice
from supervisor.domain.spec import JobSpec
from supervisor.settings import Settings

GOOD = """\
rules:
  - name: my-oom
    description: ours
    priority: 50
    category: failure
    trigger: {kind: log, regex: "MyOOM"}
    actions: [{alert: {message: "{run}: oom"}}]
"""


class Recorder:
    def __init__(self) -> None:
        self.events: list[Notice] = []

    def publish(self, event: Notice) -> None:
        self.events.append(event)

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        pass


def test_a_bad_rules_file_keeps_the_old_rules_and_alerts(tmp_path: Path) -> None:
    rules = tmp_path / "mine.yaml"
    rules.write_text(GOOD)
    rec = Recorder()
    built = build(Settings(root=tmp_path / "root"), sinks=[rec])
    spec = JobSpec.model_validate({"name": "x", "command": ["echo"], "rules": {"files": [str(rules)]}})
    before = built.monitor.ruleset_for(spec)
    assert "my-oom" in {r.name for r in before.rules}

    rules.write_text(GOOD.replace("priority: 50", "priority: lots"))
    result = anyio.run(built.reloader.reload_now, "test")

    assert not result.all_ok
    assert built.monitor.ruleset_for(spec) is before  # the old rules stay in force
    [alert] = [e for e in rec.events if e.kind == "alert"]
    assert "mine.yaml" in alert.title and "priority" in alert.title

    rules.write_text(GOOD.replace("MyOOM", "TheirOOM"))
    assert anyio.run(built.reloader.reload_now, "test").all_ok
    assert built.monitor.ruleset_for(spec) is not before


def test_settings_reload_applies_new_cadences_and_keeps_the_old_on_a_bad_file(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    toml = root / "shepherd.toml"
    toml.write_text("[slurm]\npoll_interval_s = 3.0\n")
    built = build(Settings(root=root))
    toml.write_text(
        "[slurm]\npoll_interval_s = 7.5\n[watch]\npoll_interval_s = 0.5\npoll_budget_ops_per_s = 40\n"
    )
    assert anyio.run(built.reloader.reload_now, "test").all_ok
    assert built.daemon.settings.slurm.poll_interval_s == 7.5
    assert built.monitor.changes.poll_interval_s == 0.5
    assert built.monitor.changes.load().budget_ops_per_s == 40

    toml.write_text("[watch]\npoll_interval_s = 5\npoll_max_interval_s = 2\n")  # a quiet file polled faster
    assert not anyio.run(built.reloader.reload_now, "test").all_ok
    assert built.monitor.changes.poll_interval_s == 0.5  # refused: the old cadence stays

    toml.write_text("[slurm]\npoll_interval_s = 'soon'\n")
    assert not anyio.run(built.reloader.reload_now, "test").all_ok
    assert built.daemon.settings.slurm.poll_interval_s == 7.5  # the old settings stay in force
