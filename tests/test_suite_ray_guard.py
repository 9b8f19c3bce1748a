"""tests/conftest.py's guard: a Slurm test that starts Ray without the `ray` marker fails, since it ran
outside the Ray lock where another worker's NeMo RL ray.sub `ray stop` can kill its Ray."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

INNER = '''
import pytest

def start_a_ray_head(tmp_path):
    """What both ray.subs leave once they try to start Ray: <jobid>-logs/ray-head.log."""
    (tmp_path / "42-logs").mkdir()
    (tmp_path / "42-logs" / "ray-head.log").write_text("Local node IP: 10.0.0.1\\n")

@pytest.mark.slurm
def test_unmarked_starts_ray(tmp_path):
    start_a_ray_head(tmp_path)

@pytest.mark.slurm
@pytest.mark.ray
def test_marked_starts_ray(tmp_path):
    start_a_ray_head(tmp_path)

@pytest.mark.slurm
def test_unmarked_plain_job(tmp_path):
    (tmp_path / "43-logs").mkdir()
    (tmp_path / "43-logs" / "slurm-43.out").write_text("done\\n")

def test_unit_test_writing_the_file_as_data(tmp_path):
    start_a_ray_head(tmp_path)
'''


def test_a_slurm_test_that_starts_ray_without_the_ray_marker_fails_and_no_other(tmp_path: Path) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "test_inner.py").write_text(textwrap.dedent(INNER))
    (inner / "conftest.py").write_text(
        "from tests.conftest import _slurm_tests_without_the_ray_marker_start_no_ray  # noqa: F401\n"
    )
    (inner / "pytest.ini").write_text("[pytest]\nmarkers =\n    slurm\n    ray\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rE",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "--basetemp",
            str(tmp_path / "basetemp"),
            str(inner),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=inner,
        env=env,
    )
    assert "4 passed, 1 error" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    assert "ERROR test_inner.py::test_unmarked_starts_ray" in r.stdout
    assert "is not marked `ray`" in r.stdout and "42-logs/ray-head.log" in r.stdout
