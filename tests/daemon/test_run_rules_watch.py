"""Editing a run's own rules file reloads the rules like an edit of the shipped ones: a good file is in force
at once, a bad one is refused (the old rules stay) with an alert (issue #30)."""

from __future__ import annotations

from pathlib import Path

import anyio

from supervisor.daemon.compose import build
from supervisor.daemon.rulewatch import watch_rules_files, watched
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


class Alerts:
    def __init__(self) -> None:
        self.events: list[Notice] = []
        self.came = anyio.Event()

    def publish(self, event: Notice) -> None:
        self.events.append(event)
        if event.kind == "alert":
            self.came.set()

    def publish_plot(self, run_id: str, png: str, title: str) -> None:
        pass


def test_a_runs_file_is_watched_through_its_folder_but_only_its_own_changes_count(tmp_path: Path) -> None:
    shipped, mine = tmp_path / "shipped", tmp_path / "exp" / "mine.yaml"
    shipped.mkdir()
    mine.parent.mkdir()
    folders, whole, own = watched([shipped, tmp_path / "gone"], [mine, tmp_path / "nowhere" / "r.yaml"])
    assert folders == {shipped, mine.parent} and whole == {shipped} and own == {mine}


async def edit_until(path: Path, text: str, happened: anyio.Event) -> None:
    """Write until the watcher saw it (it may not be watching yet when the first write lands)."""
    while not happened.is_set():
        path.write_text(text)
        with anyio.move_on_after(1):
            await happened.wait()


def test_an_edit_of_a_runs_rules_file_reloads_and_a_bad_one_is_refused_with_an_alert(tmp_path: Path) -> None:
    rules = tmp_path / "exp" / "mine.yaml"
    rules.parent.mkdir()
    rules.write_text(GOOD)
    alerts = Alerts()
    built = build(Settings(root=tmp_path / "root"), sinks=[alerts])
    spec = JobSpec.model_validate({"name": "x", "command": ["echo"], "rules": {"files": [str(rules)]}})
    before = built.monitor.ruleset_for(spec)
    assert built.monitor.rules_files() == {rules}
    reasons: list[str] = []
    in_force = anyio.Event()

    async def reload(reason: str) -> object:
        reasons.append(reason)
        result = await built.reloader.reload_now(reason)
        if built.monitor.ruleset_for(spec) is not before:
            in_force.set()
        return result

    async def edit(text: str, seen: anyio.Event) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: watch_rules_files(list, built.monitor.rules_files, reload, debounce_ms=50))
            (rules.parent / "notes.txt").write_text("not rules")  # the folder's other files are not rules
            await edit_until(rules, text, seen)
            tg.cancel_scope.cancel()

    anyio.run(edit, GOOD.replace("priority: 50", "priority: lots"), alerts.came)
    assert built.monitor.ruleset_for(spec) is before  # refused: the old rules stay in force
    [alert] = [e for e in alerts.events if e.kind == "alert"]
    assert "mine.yaml" in alert.title and "priority" in alert.title
    assert reasons and all(r == "rules file changed: mine.yaml" for r in reasons)

    anyio.run(edit, GOOD.replace("MyOOM", "TheirOOM"), in_force)
    assert built.monitor.ruleset_for(spec) is not before  # the fixed file is in force
