"""Every default rule, both sides, on the shapes real failure logs have (reference/real-failure-logs.md)."""

# ruff: noqa: E501
# (real log lines are long; their shapes matter more than the width)

from __future__ import annotations

import pytest

from supervisor.domain.jobstate import JobState
from supervisor.domain.observations import ProgressEvent, StateEvent, Tick
from supervisor.rules.engine import (
    Match,
    MatcherState,
    RuleSet,
    feed,
    load_ruleset,
    note_files,
)
from supervisor.rules.model import render_template
from supervisor.rules.replay import replay_text
from tests.rules.test_emitter_patterns import NEW_RULES


@pytest.fixture(scope="module")
def rs() -> RuleSet:
    return load_ruleset()


def decided(rs: RuleSet, log: str, source: str = "ray-driver.log") -> list[Match]:
    """Replay `log` through the daemon's own normaliser and the engine; the matches that carry a decision."""
    out = replay_text(rs, log, source, MatcherState(run_id="r1", attempt=1))
    return [m for m in out if not m.followup]


def final_rule(rs: RuleSet, log: str) -> str | None:
    """The rule that owns the incident in the end (the last decision, after supersessions)."""
    ms = decided(rs, log)
    return ms[-1].rule if ms else None


POSITIVE = {
    "hf-cache-not-shared": [
        "(DTensorPolicyWorker[rank=3] pid=4411, ip=10.0.0.7) FileNotFoundError: Pretrained run config not found at "
        "/root/.cache/huggingface/nemo_rl/Qwen/Qwen2.5-1.5B/iter_0000000/run_config.yaml on rank=3. This usually "
        "means that the one-time HF->mcore conversion on rank=0 saved to a directory not being mounted on this node",
        """Traceback (most recent call last):
  File "/opt/nemo_rl/models/megatron/community_import.py", line 88, in import_model_from_hf_name
    raise FileNotFoundError(
FileNotFoundError: Pretrained run config not found at /home/u/.cache/huggingface/nemo_rl/m/run_config.yaml on rank=1""",
    ],
    "cuda-oom": [
        """Traceback (most recent call last):
  File "/opt/nemo_rl/examples/run_grpo_math.py", line 200, in <module>
    main()
  File "/opt/nemo_rl/algorithms/grpo.py", line 512, in grpo_train
    train_results = policy.train(train_data, loss_fn)
ray.exceptions.RayTaskError(OutOfMemoryError): ray::DTensorPolicyWorker.train() (pid=2812, ip=10.0.0.12, actor_id=ab)
  File "/opt/nemo_rl/models/policy/dtensor_policy_worker.py", line 700, in train
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of \
which 1.2 GiB is free. If reserved but unallocated memory is large try setting \
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.""",
        # the wrapper only, the torch line missing, nested twice
        "ray.exceptions.RayTaskError(RayTaskError(OutOfMemoryError)): ray::Policy.generate() (pid=1, ip=10.0.0.3)",
        "(VllmGenerationWorker pid=77, ip=10.0.0.2) CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
        "[rank5]: torch.AcceleratorError: CUDA error: out of memory",
    ],
    "host-oom": [
        "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks have been OOM Killed.",
        "slurmstepd: error: Detected 3 oom-kill event(s) in step 4242.batch cgroup. Some of your processes may have "
        "been killed by the cgroup out-of-memory handler.",
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\nMemory on the node "
        "(IP: 10.0.0.4, ID: 7f3a) where the task (actor ID: 1, name=Policy.__init__, pid=9) was running was "
        "237.01GB / 240.00GB (0.98), which exceeds the memory usage threshold of 0.95.",
        "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task. Exit type: "
        "NODE_OUT_OF_MEMORY [repeated 15x across cluster]",
    ],
    "nccl-error": [
        "[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=4012, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600054 "
        "milliseconds before timing out.",
        # spliced into a tqdm bar (the normaliser split the \r segments, the newline never came)
        "Collecting rollouts:  21%|##        | 428/2048 [02:01<05:42, 4.73it/s][E ProcessGroupNCCL.cpp:1182] "
        "[Rank 0] NCCL watchdog thread terminated with exception: NCCL error: remote process exited or there "
        "was a network error",
        "node7:31337:31400 [2] NCCL WARN NET/IB : ibv_modify_qp failed with 110 Connection timed out",
        "node7:31337:31400 [2] NCCL INFO transport/net_ib.cc:1025 -> 3",
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\nncclSystemError: System "
        "call (e.g. socket, malloc) or external library call failed or device error.",
    ],
    "ray-actor-died": [
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n\tclass_name: "
        "VllmGenerationWorker\n\tactor_id: 5c2f\n\tpid: 2812\n\tThe actor is dead because its worker process has died. "
        "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2.",
        "(raylet) ray.exceptions.RayActorError: The actor died because of an error raised in its creation task",
    ],
    "ray-startup-failed": [
        "ConnectionError: Could not find any running Ray instance. Please specify the one to connect to.",
        "[2026-11-21 10:00:01,000 E 1234 1234] gcs_rpc_client.h:179: Failed to connect to GCS at address "
        "10.0.0.1:6379 within 60 seconds.",
    ],
    "vllm-engine-dead": [
        "(VllmGenerationWorker pid=9, ip=10.0.0.5) ERROR 11-21 10:00:01 [async_llm.py:420] "
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the "
        "root cause.",
        "(EngineCore_DP0 pid=4242) ERROR 11-21 10:00:01 [core.py:700] EngineCore encountered a fatal error.",
    ],
    "cuda-hardware-error": [
        "[rank2]:[E ProcessGroupNCCL.cpp:1025] [Rank 2] NCCL watchdog thread terminated with exception: CUDA error: "
        "uncorrectable ECC error encountered",
        "[Thu Nov 21 10:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus.",
        "RuntimeError: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be "
        "asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    ],
    "slurm-time-limit": [
        "slurmstepd: error: *** JOB 4242 ON node1 CANCELLED AT 2026-11-21T10:00:00 DUE TO TIME LIMIT ***",
        "slurmstepd: error: *** STEP 4242.0 ON node3 CANCELLED AT 2026-11-21T10:00:00 DUE TO TIME LIMIT ***",
        # Slurm < 17.11 put the node last; 23.x names the daemon slurmstepd-<host>
        "slurmstepd: *** JOB 830329 CANCELLED AT 2018-08-06T17:21:44 DUE TO TIME LIMIT on n447 ***",
        "slurmstepd-phoenix-07: error: *** JOB 1449736 ON phoenix-07 CANCELLED AT 2023-12-03T12:47:09 DUE TO TIME LIMIT ***",
    ],
    "slurm-preempted": [
        "slurmstepd: error: *** JOB 4242 ON node2 CANCELLED AT 2026-11-21T10:00:00 DUE TO PREEMPTION ***",
    ],
    "training-deadline": [  # NeMo RL's own words after its checkpoint_must_save_by save (grpo.py)
        "Saving checkpoint for step 40...\nTimeout has been reached, stopping training early",
    ],
    "cuda-device-assert": [
        "../aten/src/ATen/native/cuda/Indexing.cu:1308: indexSelectLargeIndex: block: [56,0,0], thread: [0,0,0] "
        "Assertion `srcIndex < srcSelectDimSize` failed.",
        "[rank1]: RuntimeError: CUDA error: device-side assert triggered",
    ],
    "nan-loss": [
        "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-06, 'epoch': 0.3}",
        "(DTensorPolicyWorker pid=77) AssertionError: Rank 3: found NaN in local grad norm in backwards pass.",
        "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0",
    ],
    "segfault": [
        "(RayWorkerWrapper pid=376235, ip=10.10.10.61) Fatal Python error: Segmentation fault",
        "srun: error: node3: task 5: Segmentation fault (core dumped)",
    ],
    "bus-error": [
        "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
        "srun: error: node3: task 289: Bus error",
    ],
    "node-failure": [
        "srun: error: Node failure on node5",
        "slurmstepd: error: *** JOB 4242 ON node5 CANCELLED AT 2026-11-21T10:00:00 DUE TO NODE FAILURE ***",
        "slurmstepd: error: *** STEP 4242.0 ON node5 CANCELLED AT 2026-11-21T10:00:00 DUE TO NODE FAILURE, SEE "
        "SLURMCTLD LOG FOR DETAILS ***",
        "(raylet) The node with node id: 3fa2 and address: 10.0.0.9 and node name: 10.0.0.9 has been marked dead "
        "because the detector has missed too many heartbeats from it.",
    ],
}

NEGATIVE = {
    "cuda-oom": [
        "(RayWorkerWrapper pid=88, ip=10.0.0.2) WARNING 11-21 10:00:00 [worker.py:211] To avoid out-of-memory "
        "errors, consider lowering gpu_memory_utilization",
        "(VllmGenerationWorker pid=9) INFO 11-21 10:00:00 [gpu_worker.py:99] Memory profiling takes 3.21 seconds; "
        "memory freed 12.5 GiB",
        "WARNING: caught torch.OutOfMemoryError during batch-size search, retrying with micro_batch_size=4",
        "UserWarning: an out-of-memory error may occur with sequence_packing disabled",
    ],
    "nccl-error": [
        "node7:31337:31400 [0] NCCL INFO NET/IB : No device found.",
        "node7:31337:31400 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
        "node7:31337:31400 [0] NCCL INFO comm 0x5612 rank 0 nranks 16 cudaDev 0 busId 18000 - Init COMPLETE",
        "[rank0]:[W ProcessGroupNCCL.cpp:4561] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS=1 has no effect for "
        "point-to-point collectives.",
        "node7:31337:31400 [0] NCCL INFO transport/net_ib.cc:1025 -> 0",
    ],
    "ray-actor-died": [
        "WARNING: actor VllmGenerationWorker will be restarted (ray.exceptions.RayActorError caught in health check)",
    ],
    "training-deadline": [
        "Max number of steps has been reached, stopping training early",
        "INFO timeout checker: 00:03:50:00 budget, 00:01:10:00 left",
    ],
    "ray-startup-failed": [
        "[2026-11-21 10:00:01,000 W 1 1] Failed to connect to GCS, retrying in 1 s (attempt 2 of 30)",
        "Started a local Ray instance. View the dashboard at 127.0.0.1:8265",
    ],
    "cuda-hardware-error": [
        "ECC mode: Enabled; Volatile ECC errors: 0",
        "INFO nvidia-smi: Xid events none",
    ],
    "slurm-time-limit": [
        "slurmstepd: error: *** JOB 4242 ON node1 CANCELLED AT 2026-11-21T10:00:00 ***",
        "INFO step 99 time limit per step: 300s",
    ],
    "host-oom": [
        "INFO memory monitor: node memory usage 40% (threshold 95%)",
    ],
    "hf-cache-not-shared": [
        "INFO loaded run config from /shared/hf/nemo_rl/m/run_config.yaml",
    ],
    "vllm-engine-dead": [
        "INFO 11-21 10:00:00 [core.py:71] Initializing a V1 LLM engine (v0.10.0) with config: model='Qwen'",
    ],
    "cuda-device-assert": [
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    ],
    "nan-loss": [
        # fp16 loss scalers report a skipped step's grad norm as nan while the loss is fine
        "Epoch [1][100/62598]\tlr: 1.000e-03, loss: 1.9091, grad_norm: nan",
        " iteration 10/ 100 | lm loss: 2.504220E+00 | loss scale: 1.0 | number of nan iterations:   0 |",
        "INFO step 12: loss 0.4132, reward 0.61, inference took 812 nanoseconds per token",
        "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4294967296, reducing to 2147483648",
    ],
    "segfault": [
        "The worker is crashed unexpectedly due to SIGSEGV or other unexpected errors.",
    ],
}


@pytest.mark.parametrize(("rule", "log"), [(r, log) for r, logs in POSITIVE.items() for log in logs])
def test_rule_fires_on_real_shape(rs: RuleSet, rule: str, log: str) -> None:
    assert final_rule(rs, log) == rule


@pytest.mark.parametrize(("rule", "log"), [(r, log) for r, logs in NEGATIVE.items() for log in logs])
def test_harmless_line_does_not_fire(rs: RuleSet, rule: str, log: str) -> None:
    assert decided(rs, log) == [], f"{rule}: a harmless line fired"


def test_caught_exception_traceback_does_not_fire(rs: RuleSet) -> None:
    log = """Traceback (most recent call last):
  File "/opt/nemo_rl/utils/retry.py", line 41, in call_with_retry
    return fn()
ValueError: sample too long
INFO retrying with the next sample"""
    assert decided(rs, log) == []


def test_every_default_rule_is_exercised(rs: RuleSet) -> None:
    covered = set(POSITIVE) | {"rollouts-stalled", "qos-pending", "run-completed", "ray-startup-failed"}
    covered |= {"ended-not-written"}  # its own line comes from the monitor: tests/rules/test_ended_rule.py
    # ray.sub's own refusal, as it prints it: tests/rules/test_raysub_gres_rule.py
    covered |= {"raysub-gres-mismatch"}
    # the environment's failures, from their emitters: tests/rules/test_emitter_patterns.py
    covered |= NEW_RULES
    # the RL training-health rules run on metric streams: tests/rules/test_health_rules.py
    covered |= {
        "reward-collapse",
        "policy-mismatch",
        "grad-norm-spike",
        "response-length-collapse",
        "response-length-pinned",
        "no-learning-signal",
        "validation-regression",
    }
    assert {r.name for r in rs.rules} == covered


def _state(
    state: JobState, at: float, reason: str = "", exit_code: int | None = None, nodes: str = ""
) -> StateEvent:
    return StateEvent("r1", 1, "4242", state, reason=reason, exit_code=exit_code, nodes=nodes, at=at)


def test_slurm_states_map_to_rules(rs: RuleSet) -> None:
    for state, rule in [
        (JobState.TIMEOUT, "slurm-time-limit"),
        (JobState.PREEMPTED, "slurm-preempted"),
        (JobState.NODE_FAIL, "node-failure"),
        (JobState.OUT_OF_MEMORY, "host-oom"),
        (JobState.COMPLETED, "run-completed"),
    ]:
        st = MatcherState(run_id="r1", attempt=1)
        ms = feed(rs, st, _state(state, 100.0, nodes="node9"))
        assert [m.rule for m in ms] == [rule]
    st = MatcherState(run_id="r1", attempt=1)
    assert feed(rs, st, _state(JobState.FAILED, 1.0, exit_code=1)) == []


def test_node_failure_names_the_node_to_exclude(rs: RuleSet) -> None:
    (m,) = decided(rs, "srun: error: Node failure on gpu-node-17")
    assert m.node == "gpu-node-17"
    assert m.actions[0].resume is not None and m.actions[0].resume.exclude_node
    st = MatcherState(run_id="r1", attempt=1)
    (m2,) = feed(rs, st, _state(JobState.NODE_FAIL, 5.0, nodes="node4"))
    assert m2.node == "node4"


def test_qos_pending_fires_after_its_duration_and_priority_stays_quiet(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    assert feed(rs, st, _state(JobState.PENDING, 0.0, reason="QOSMaxGRESPerUser")) == []
    assert feed(rs, st, Tick(29 * 60)) == []
    (m,) = feed(rs, st, Tick(31 * 60))
    assert m.rule == "qos-pending" and "QOSMaxGRESPerUser" in m.reason
    assert feed(rs, st, Tick(90 * 60)) == []  # once per stretch, not per tick

    quiet = MatcherState(run_id="r2", attempt=1)
    for reason in ("Priority", "Resources"):
        feed(rs, quiet, _state(JobState.PENDING, 0.0, reason=reason))
        assert feed(rs, quiet, Tick(5 * 3600)) == []


def test_rollouts_stalled_fires_without_progress_and_rearms_after_progress(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    feed(rs, st, _state(JobState.RUNNING, 0.0))
    note_files(st, ["STARTED_RAY_HEAD", "ray-driver.log"])
    feed(rs, st, ProgressEvent("r1", 1, "rollouts", 428, 2048, at=60.0))
    assert feed(rs, st, Tick(60.0 + 29 * 60)) == []
    (m,) = feed(rs, st, Tick(60.0 + 31 * 60))
    assert m.rule == "rollouts-stalled" and "rollouts=428" in m.reason
    assert feed(rs, st, Tick(60.0 + 45 * 60)) == []


def test_progress_keeps_stall_quiet(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    feed(rs, st, _state(JobState.RUNNING, 0.0))
    note_files(st, ["STARTED_RAY_HEAD", "ray-driver.log"])
    for i in range(1, 20):
        feed(rs, st, ProgressEvent("r1", 1, "step", i, at=i * 600.0))
        assert feed(rs, st, Tick(i * 600.0 + 300)) == []


def test_ray_head_sentinel_missing_fires_ray_startup_failed(rs: RuleSet) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    feed(rs, st, _state(JobState.RUNNING, 0.0))
    assert feed(rs, st, Tick(9 * 60)) == []
    (m,) = feed(rs, st, Tick(11 * 60))
    assert m.rule == "ray-startup-failed" and "STARTED_RAY_HEAD" in m.reason

    ok = MatcherState(run_id="r1", attempt=1)
    feed(rs, ok, _state(JobState.RUNNING, 0.0))
    note_files(ok, ["STARTED_RAY_HEAD"])
    assert feed(rs, ok, Tick(11 * 60)) == []


def test_hf_cache_rule_patches_env_from_the_spec(rs: RuleSet) -> None:
    (m,) = decided(rs, POSITIVE["hf-cache-not-shared"][0])
    resume = m.actions[0].resume
    assert resume is not None and resume.env["HF_HOME"] == "{spec.shared_cache_dir}/huggingface"
    assert m.deterministic and m.max_retries == 1
    assert m.signature.endswith("run_config.yaml")


def test_alert_and_env_templates_render_from_a_match(rs: RuleSet) -> None:
    (m,) = decided(rs, POSITIVE["hf-cache-not-shared"][0])
    ctx = m.template_context(job_id="4242", spec={"shared_cache_dir": "/shared/cache"})
    resume, alert = m.actions[0].resume, m.actions[1].alert
    assert resume is not None and alert is not None
    assert render_template(resume.env["HF_HOME"], ctx) == "/shared/cache/huggingface"
    text = render_template(alert.message, ctx)
    assert (
        text.startswith("r1: the one-time HF->mcore conversion") and "Pretrained run config not found" in text
    )
    assert "resuming" not in text  # the cause only: the daemon appends what it did (decide/plan.py announce)


def test_a_head_that_started_without_a_driver_for_40_minutes_is_a_bring_up_that_never_finished(
    rs: RuleSet,
) -> None:
    st = MatcherState(run_id="r1", attempt=1)
    feed(rs, st, _state(JobState.RUNNING, 0.0))
    note_files(st, ["STARTED_RAY_HEAD", "ray-head.log"])  # NeMo RL's head waits up to 30 min for its workers
    assert feed(rs, st, Tick(29 * 60.0)) == []
    [stall] = feed(rs, st, Tick(31 * 60.0))  # no progress either: the stall rule says so first
    (m,) = feed(rs, st, Tick(41 * 60.0))
    assert stall.rule == "rollouts-stalled"
    assert m.rule == "ray-startup-failed" and "ray-driver.log not written" in m.reason


def _re2_refused(pattern: str) -> set[str]:
    """The constructs of `pattern` that RE2 refuses (lookaround, backreferences), by walking Python's parse."""
    import importlib

    parser = importlib.import_module("re._parser")
    consts = importlib.import_module("re._constants")
    refused = {consts.ASSERT, consts.ASSERT_NOT, consts.GROUPREF, consts.GROUPREF_EXISTS}
    found: set[str] = set()
    todo = [parser.parse(pattern)]
    while todo:
        for op, av in todo.pop():
            if op in refused:
                found.add(str(op))
            for sub in av if isinstance(av, tuple | list) else ():
                subs = sub if isinstance(sub, list) else [sub]
                todo += [x for x in subs if isinstance(x, parser.SubPattern)]
    return found


def test_default_patterns_have_no_lookaround_or_backreference(rs: RuleSet) -> None:
    """The rules engine is moving to a linear-time (RE2) engine that refuses both: keep the default set portable."""
    assert _re2_refused(r"a(?=b)|(x)\1|(?<!y)z") == {"ASSERT", "GROUPREF", "ASSERT_NOT"}
    patterns = [lg.regex.pattern for cr in rs.rules for lg in cr.logs]
    patterns += [lg.exclude.pattern for cr in rs.rules for lg in cr.logs if lg.exclude is not None]
    assert len(patterns) > 10
    for pattern in patterns:
        assert not _re2_refused(pattern), pattern
