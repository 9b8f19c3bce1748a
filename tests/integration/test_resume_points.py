"""`shepherd resume RUN step_N` through NeMo RL's own ray.sub, unmodified: the driver really resumes from N.

NeMo RL has no "resume from": it takes the highest step_N in checkpointing.checkpoint_dir. The spec below is
what a user writes once: no resume.checkpoint_dir_arg (the nemo-rl launcher's default points NeMo RL at the
staged step), no checkpoint.dir (taken from the command), a relative log_dir (it starts in the spec's
folder). The driver is tests/support/nemo_rl_standin.py, which resumes the way NeMo RL does
(../shared/reference/nemo-rl-facts.md). ray.sub runs `ray stop`: the module holds tests/support/raylock.py's
lock exclusive while its daemon lives.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import REPO, DaemonProcess
from tests.support.raylock import ray_users

from .conftest import VENV_BIN, SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.ray, pytest.mark.ray_stop]

STANDIN = REPO / "tests" / "support" / "nemo_rl_standin.py"
RAY_SUB = REPO.parent / "shared" / "third_party" / "nemo-rl" / "ray.sub.main-7ea279a"
FINAL = {"COMPLETED", "FAILED", "GAVE_UP", "CANCELLED"}


@pytest.fixture(scope="module")
def sup(tmp_path_factory: pytest.TempPathFactory, slurm_cluster: SlurmCluster) -> Iterator[DaemonProcess]:
    if not RAY_SUB.is_file():
        pytest.skip(f"no NeMo RL ray.sub at {RAY_SUB} (../shared)")
    if not (VENV_BIN / "ray").exists():
        pytest.skip("ray is not installed in .venv (scripts/setup)")
    with ray_users(exclusive=True):  # ray.sub's `ray stop`: no other Ray test runs while its jobs do
        d = DaemonProcess(tmp_path_factory.mktemp("resume-points") / "root", env=slurm_cluster.env)
        d.start()
        try:
            yield d
        finally:
            d.stop()


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_resume_from_a_step_makes_nemo_rl_resume_from_it(sup: DaemonProcess, tmp_path: Path) -> None:
    """Attempt 1 saves step_2 and step_4 and crashes at step 5 (unrecognised, left to a person). A step that
    is not there is refused with the list; `resume RUN step_2` stages it and NeMo RL's rule (highest step_N
    of its checkpoint dir) loads step_2, not step_4."""
    results, record = tmp_path / "results", tmp_path / "record.jsonl"
    command = shlex.join(
        ["python", str(STANDIN), f"checkpointing.checkpoint_dir={results}",
         f"logger.log_dir={tmp_path / 'tb'}", "--record", str(record), "--steps", "6", "--save-every", "2",
         "--peak", "2", "--fail-at", "5", "--failure", "odd"]
    )  # fmt: skip
    spec = tmp_path / "spec" / "resume.yaml"
    spec.parent.mkdir()
    spec.write_text(
        "\n".join(
            [
                "name: resume-points",
                f"command: {json.dumps(command)}",
                f"workdir: {tmp_path}",
                f"launcher: {{kind: nemo-rl, script: {RAY_SUB}}}",
                "slurm: {account: shepherd, partition: gpu, nodes: 1, gpus_per_node: 4, time: '00:15:00'}",
                f"container: {{image: nvcr.io/nvidia/nemo-rl:v0.6.0, mounts: ['{tmp_path}:{tmp_path}']}}",
                'env: {"RAY_AUTH_MODE": "disabled"}',  # else `ray status` fails once ~/.ray/auth_token exists
                "checkpoint: {metric: 'val:accuracy'}",
                "log_dir: slurm-logs",
                "resume: {backoff_s: 0, unrecognised_after_progress: false}",
            ]
        )
        + "\n"
    )
    run = sup.submit(spec)
    failed = sup.wait_state(run, FINAL, timeout=240)
    assert failed["state"] == "FAILED", sup.status(run)
    assert list(
        (tmp_path / "spec" / "slurm-logs").glob("*-logs/ray-driver.log")
    )  # log_dir: the spec's folder

    listing = sup.cli("checkpoints", run).stdout
    assert [line.split()[:3] for line in listing.splitlines()[1:3]] == [
        ["step_4", "0.98", "latest"],
        ["step_2", "1", "best"],
    ], listing
    refused = sup.cli("resume", run, "step_99", check=False)
    assert refused.returncode != 0 and "has no step_99" in refused.stderr, refused
    assert "step_4 (val:accuracy 0.98, latest), step_2 (val:accuracy 1, best)" in refused.stderr

    assert "from step_2" in sup.cli("resume", run, "step_2").stdout
    final = sup.wait_state(run, FINAL, timeout=240)
    assert final["state"] == "COMPLETED", sup.status(run)
    first, second = records(record)
    assert first["resumed_from"] == 0 and second["resumed_from"] == 2  # NeMo RL loaded step_2, not step_4
    assert second["checkpoint_dir"] == str(tmp_path / "results.staged" / run / "attempt-2")
    assert sorted(p.name for p in results.glob("step_*")) == ["step_2", "step_4"]  # the user's dir untouched
