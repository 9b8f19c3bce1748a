"""An end no rule recognised still shows its cause: the final exception of the log's last traceback (else its
last error line), where it is, and a regex that a suggested rule fires on."""

# ruff: noqa: E501
# (real log lines are long; their shapes matter more than the width)

from __future__ import annotations

from pathlib import Path

import pytest

from supervisor.rules.decisive import DecisiveLine, decisive_line, line_signature, rule_name, suggest_rule
from supervisor.rules.engine import load_ruleset
from supervisor.rules.loader import check_files, load_rules_text
from supervisor.rules.regex import compile_regex
from supervisor.rules.replay import replay_text

PLAIN = """\
INFO step 3: loss=0.12
Traceback (most recent call last):
  File "/opt/nemo_rl/examples/run_grpo.py", line 40, in <module>
    main()
  File "/opt/nemo_rl/examples/run_grpo.py", line 31, in main
    raise ValueError(f"bad batch size {n}")
ValueError: bad batch size 48 for 3 GPUs
INFO shutting down
"""


def test_a_plain_traceback_gives_its_exception_line_and_where_it_is() -> None:
    d = decisive_line(PLAIN, "ray-driver.log")
    assert d is not None
    assert (d.source, d.line, d.kind) == ("ray-driver.log", 7, "exception")
    assert d.text == "ValueError: bad batch size 48 for 3 GPUs"
    assert d.where() == "ray-driver.log:7"


def test_a_chained_traceback_gives_the_exception_that_ended_the_process() -> None:
    log = """\
Traceback (most recent call last):
  File "a.py", line 1, in f
KeyError: 'step'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "a.py", line 9, in main
    load()
  File "a.py", line 3, in load
    raise RuntimeError("checkpoint is missing its step") from exc
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
RuntimeError: checkpoint is missing its step
"""
    d = decisive_line(log, "ray-driver.log")
    assert d is not None and (d.line, d.text) == (13, "RuntimeError: checkpoint is missing its step")


def test_rays_prefixed_task_error_gives_the_workers_own_exception() -> None:
    log = """\
(DTensorPolicyWorker[rank=0] pid=2812, ip=10.0.0.12) INFO step 3
Traceback (most recent call last):
  File "/opt/nemo_rl/algorithms/grpo.py", line 512, in grpo_train
    train_results = policy.train(train_data, loss_fn)
(DTensorPolicyWorker pid=2812, ip=10.0.0.12) ray.exceptions.RayTaskError(ValueError): ray::DTensorPolicyWorker.train() (pid=2812, ip=10.0.0.12)
  File "/opt/nemo_rl/models/policy/dtensor_policy_worker.py", line 700, in train
    self.check(batch)
ValueError: sequence length 9000 exceeds max_seq_len 8192
(raylet, ip=10.0.0.12) INFO worker exited
"""
    d = decisive_line(log, "ray-driver.log")
    assert d is not None and d.line == 8
    assert d.text == "ValueError: sequence length 9000 exceeds max_seq_len 8192"


def test_a_ray_worker_traceback_reads_only_its_own_prefixed_lines() -> None:
    log = """\
(Worker pid=7, ip=10.0.0.3) Traceback (most recent call last):
(Worker pid=8, ip=10.0.0.4) INFO still going
(Worker pid=7, ip=10.0.0.3)   File "w.py", line 2, in run
(Worker pid=8, ip=10.0.0.4) INFO still going
(Worker pid=7, ip=10.0.0.3) AssertionError: rewards must be finite
(Worker pid=8, ip=10.0.0.4) INFO still going
"""
    d = decisive_line(log, "ray-driver.log")
    assert d is not None and (d.line, d.text) == (5, "AssertionError: rewards must be finite")


def test_interleaved_ranks_give_the_last_ranks_exception() -> None:
    log = """\
[rank0]: Traceback (most recent call last):
[rank1]: Traceback (most recent call last):
[rank0]:   File "train.py", line 10, in <module>
[rank1]:   File "train.py", line 10, in <module>
[rank0]: torch.distributed.DistBackendError: NCCL communicator was aborted on rank 0
[rank1]: torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1
"""
    d = decisive_line(log, "slurm-77.out")
    assert d is not None and d.line == 6
    assert d.text == "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1"


def test_without_a_traceback_the_last_error_line_is_decisive() -> None:
    log = """\
2026-11-27 10:00:01 INFO starting
2026-11-27 10:00:02 ERROR could not open /data/train.jsonl
srun: error: node3: task 0: Exited with exit code 1
[ray.sub 2026-11-27 10:00:03] driver exited with code 1
"""
    d = decisive_line(log, "slurm-77.out")
    assert d is not None and (d.line, d.kind) == (3, "error")
    assert d.text == "srun: error: node3: task 0: Exited with exit code 1"


def test_a_tail_of_a_long_log_keeps_the_files_line_numbers() -> None:
    d = decisive_line(PLAIN, "ray-driver.log", first_line=1001)
    assert d is not None and d.line == 1007


def test_a_log_with_nothing_decisive_gives_none() -> None:
    assert decisive_line("INFO step 1\nINFO step 2\n", "ray-driver.log") is None
    assert decisive_line("", "ray-driver.log") is None


def test_a_decisive_line_is_clipped_like_a_matched_rules_excerpt() -> None:
    d = decisive_line("RuntimeError: " + "x" * 5000 + "\n", "ray-driver.log")
    assert d is not None and len(d.text) == 300


@pytest.mark.parametrize(
    ("line", "sibling"),
    [
        ("ValueError: bad batch size 48 for 3 GPUs", "ValueError: bad batch size 64 for 8 GPUs"),
        (
            "FileNotFoundError: [Errno 2] No such file or directory: '/lustre/u/ckpt/step_40/model.pt'",
            "FileNotFoundError: [Errno 2] No such file or directory: '/scratch/v/ckpt/step_80/model.pt'",
        ),
        (
            "RuntimeError: bad pointer 0x7f3a2c00 (id 9f8e7d6c5b4a)",
            "RuntimeError: bad pointer 0x10 (id 0a1b2c3d4e5f)",
        ),
        ("KeyError: 'step' (*?+[{|^$.\\)", "KeyError: 'step' (*?+[{|^$.\\)"),
    ],
)
def test_a_signature_finds_the_line_and_its_siblings_in_re2(line: str, sibling: str) -> None:
    rx = compile_regex(line_signature(line))
    assert rx.search(line) is not None
    assert rx.search(f"[rank3]: {sibling}") is not None


def test_a_signature_keeps_the_words_that_say_what_failed() -> None:
    sig = line_signature("ValueError: bad batch size 48 for 3 GPUs")
    assert sig == r"ValueError:\s+bad\s+batch\s+size\s+[0-9.]+\s+for\s+[0-9.]+\s+GPUs"
    assert compile_regex(sig).search("ValueError: bad learning rate 3") is None


def test_the_suggested_rule_is_a_valid_rules_file_that_fires_on_the_log(tmp_path: Path) -> None:
    d = decisive_line(PLAIN, "ray-driver.log")
    assert d is not None
    text = suggest_rule(d, run="r1", attempt=2)
    assert "r1 attempt 2, ray-driver.log:7" in text
    doc = load_rules_text(text, "suggested.yaml")
    (rule,) = doc.rules
    assert rule.name == "value-error"
    path = tmp_path / "suggested.yaml"
    path.write_text(text)
    assert check_files([path]) == []
    rs = load_ruleset([path])
    assert [m.rule for m in replay_text(rs, PLAIN) if not m.followup] == ["value-error"]


def test_a_suggested_rule_for_slurms_output_reads_every_jobs_output_file() -> None:
    d = DecisiveLine("slurm-77.out", 3, "srun: error: node3: task 0: Exited with exit code 1", "error", "x")
    doc = load_rules_text(suggest_rule(d), "s.yaml")
    assert rule_name(d) == "unrecognised-error"
    trigger = doc.rules[0].all_triggers[0]
    assert getattr(trigger, "sources", None) == ["slurm-*.out"]


def test_rule_names_come_from_the_exception_class() -> None:
    def name(text: str) -> str:
        return rule_name(DecisiveLine("a", 1, text, "exception", "x"))

    assert name("torch.OutOfMemoryError: CUDA out of memory") == "out-of-memory-error"
    assert name("ray.exceptions.RayTaskError(ValueError): ray::W.train()") == "ray-task-error"
    assert name("KeyboardInterrupt") == "keyboard-interrupt"
