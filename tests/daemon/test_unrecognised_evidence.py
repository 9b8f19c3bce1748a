"""A failure no rule recognises still shows its cause: the decision, `shepherd status RUN` and the alert carry
the final exception of the driver log and the last error of Slurm's output file, each with file and line,
and `shepherd rules suggest RUN` turns it into a rules file the loader accepts.

The daemon as composed (`build`), its monitor handed the Slurm end as the poller would; notices recorded."""

from __future__ import annotations

import io
import json
from pathlib import Path

import anyio
import pytest

from supervisor.cli.main import main
from supervisor.cli.rules import rules_check
from supervisor.daemon.compose import Built, build
from supervisor.domain.jobstate import JobState
from supervisor.domain.observations import StateEvent
from supervisor.domain.runs import UNRECOGNISED
from supervisor.rules.engine import load_ruleset
from supervisor.rules.loader import check_files
from supervisor.rules.replay import replay
from supervisor.settings import Settings
from tests.support.sinks import RecordingSink

RUN = "toy-20260101-000000-abcd"
JOB = "4242"
DRIVER = """\
INFO step 1: loss=0.5
INFO step 2: loss=0.4
Traceback (most recent call last):
  File "/opt/nemo_rl/examples/run_grpo.py", line 40, in <module>
    main()
  File "/opt/nemo_rl/examples/run_grpo.py", line 31, in main
    raise ValueError(f"reward shape {shape} does not match batch {n}")
ValueError: reward shape (64, 2) does not match batch 32
"""
OUTPUT = """\
[ray.sub 2026-01-01 00:00:01] starting ray head
srun: error: node3: task 0: Exited with exit code 1
[ray.sub 2026-01-01 00:05:00] driver exited with code 1
"""


def failed_unrecognised(tmp_path: Path) -> tuple[Built, RecordingSink]:
    settings = Settings(root=tmp_path / "root")
    rec = RecordingSink()
    built = build(settings, sinks=[rec])
    built.store.create_run(RUN, "toy", json.dumps({"name": "toy", "command": ["true"]}), "spec.yaml")
    built.store.begin_attempt(RUN, lambda n: f"t{n}", {})
    built.store.attempt_submitted(RUN, 1, JOB)
    logs = settings.runs_dir / RUN / "logs"
    (logs / f"{JOB}-logs").mkdir(parents=True)
    (logs / f"{JOB}-logs" / "ray-driver.log").write_text(DRIVER)
    (logs / f"slurm-{JOB}.out").write_text(OUTPUT)
    built.store.observe_attempt(
        RUN, 1, slurm_state="FAILED", reason=None, nodes="node3", exit_code=1, ended=True
    )
    run, attempt = built.store.get_run(RUN), built.store.get_attempt(RUN, 1)
    assert run is not None and attempt is not None
    anyio.run(built.monitor.on_state, run, attempt, StateEvent(RUN, 1, JOB, JobState.FAILED, exit_code=1))
    return built, rec


def test_the_decision_and_the_alert_carry_the_decisive_lines(tmp_path: Path) -> None:
    built, rec = failed_unrecognised(tmp_path)
    (d,) = [d for d in built.store.decisions(RUN) if d.rule == UNRECOGNISED]
    assert d.evidence["lines"] == [
        "ray-driver.log:8: ValueError: reward shape (64, 2) does not match batch 32",
        f"slurm-{JOB}.out:2: srun: error: node3: task 0: Exited with exit code 1",
    ]
    driver, output = d.evidence["decisive"]
    assert (driver["source"], driver["line"], driver["kind"]) == ("ray-driver.log", 8, "exception")
    assert (output["source"], output["line"], output["kind"]) == (f"slurm-{JOB}.out", 2, "error")
    (alert,) = [n for n in rec.notices if n.kind == "alert"]
    assert "no rule recognised the failure" in alert.title and alert.needs_human
    assert alert.excerpt is not None and "ray-driver.log:8: ValueError: reward shape" in alert.excerpt
    built.store.close()


def test_status_shows_the_decisive_lines_and_how_to_make_a_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built, _ = failed_unrecognised(tmp_path)
    built.store.close()
    assert main(["--root", str(built.settings.root), "status", RUN]) == 0
    out = capsys.readouterr().out
    assert "| ray-driver.log:8: ValueError: reward shape (64, 2) does not match batch 32" in out
    assert f"| slurm-{JOB}.out:2: srun: error: node3" in out
    assert f"`shepherd rules suggest {RUN}`" in out


def test_rules_suggest_prints_a_rule_that_loads_and_fires_on_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built, _ = failed_unrecognised(tmp_path)
    built.store.close()
    capsys.readouterr()  # the daemon's own log
    assert main(["--root", str(built.settings.root), "rules", "suggest", RUN]) == 0
    text = capsys.readouterr().out
    assert "ray-driver.log:8" in text and "name: value-error" in text
    suggested = tmp_path / "suggested.yaml"
    suggested.write_text(text)
    assert check_files([suggested]) == []
    driver = built.settings.runs_dir / RUN / "logs" / f"{JOB}-logs" / "ray-driver.log"
    fired = [m.rule for m in replay(load_ruleset([suggested]), driver) if not m.followup]
    assert fired == ["value-error"]
    assert rules_check([suggested], io.StringIO()) == 0


def test_rules_suggest_without_anything_to_build_from_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = Settings(root=tmp_path / "root")
    built = build(settings)
    built.store.create_run(RUN, "toy", json.dumps({"name": "toy", "command": ["true"]}), "spec.yaml")
    built.store.close()
    assert main(["--root", str(settings.root), "rules", "suggest", RUN]) == 1
    assert "no traceback or error line" in capsys.readouterr().err
