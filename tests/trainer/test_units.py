"""Pure parts: config, tokenizer, sampling, batch packing, cache checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.cache_hygiene import check_caches
from trainer.config import ConfigError, config_hash, load_config, parse_duration
from trainer.driver import pad_phase
from trainer.generation.base import sample_seed
from trainer.generation.torch_backend import TorchGenerationBackend
from trainer.models import ModelSpec
from trainer.tokenizer import CharTokenizer
from trainer.workers.policy import pack_batch

# -- config ---------------------------------------------------------------------------------------------


def test_dotted_overrides_use_nemo_rl_names_and_parse_values(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("grpo:\n  max_num_steps: 10\n")
    cfg = load_config(
        f,
        [
            "grpo.max_num_steps=20",
            "policy.optimizer.lr=1e-3",
            "checkpointing.keep_top_k=null",
            "logger.log_dir=/x/y",
        ],
    )
    assert cfg.grpo.max_num_steps == 20
    assert cfg.policy.optimizer.lr == pytest.approx(1e-3)
    assert cfg.checkpointing.keep_top_k is None
    assert cfg.logger.log_dir == "/x/y"


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ("grpo.max_num_stepz=3", "grpo.max_num_stepz: unknown key"),
        ("grpo.max_num_steps=abc", "grpo.max_num_steps: expected an integer"),
        ("grpo.max_num_steps=0", "grpo.max_num_steps: must be > 0"),
        ("policy.generation.backend=tensorrt", "policy.generation.backend: must be one of"),
        ("grpo.num_generations_per_prompt=1", "grpo.num_generations_per_prompt"),
        ("policy.tiny.n_heads=4", "head dim"),
        ("grpo.stop_at_step=500", "grpo.stop_at_step"),
        ("checkpointing.checkpoint_must_save_by=soon", "checkpointing.checkpoint_must_save_by"),
        ("fault.kind=meteor", "fault.kind: must be one of"),
        ("policy.generation.vllm_cfg.kv_cache_memory_bytes=0", "vllm_cfg.kv_cache_memory_bytes: must be > 0"),
        ("policy.generation.vllm_cfg.weight_sync=nccl", "vllm_cfg.weight_sync: must be one of"),
        ("pace.validation_s=-1", "pace.validation_s: must be >= 0"),
        ("noequals", "key=value"),
    ],
)
def test_bad_overrides_fail_naming_the_key(override: str, names: str) -> None:
    with pytest.raises(ConfigError, match=names.replace("(", r"\(")):
        load_config(None, [override])


def test_config_hash_is_stable_and_changes_with_the_config() -> None:
    a, b = load_config(None, []), load_config(None, [])
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash(load_config(None, ["grpo.seed=7"]))


def test_duration_parsing_matches_nemo_rl_format() -> None:
    assert parse_duration("00:03:30:00") == 3.5 * 3600
    assert parse_duration("01:00") == 60


def test_a_paced_phase_sleeps_out_only_what_its_work_left_of_the_minimum() -> None:
    slept: list[float] = []
    assert pad_phase(10.0, 3.0, clock=lambda: 11.0, sleep=slept.append) == 2.0
    assert pad_phase(10.0, 3.0, clock=lambda: 14.0, sleep=slept.append) == 0.0  # the work took longer
    assert pad_phase(10.0, 0.0, clock=lambda: 10.0, sleep=slept.append) == 0.0  # pace off (the default)
    assert slept == [2.0]


# -- tokenizer ------------------------------------------------------------------------------------------


def test_char_tokenizer_round_trip_stops_at_eos() -> None:
    tok = CharTokenizer("abc>")
    ids = tok.encode("ab>")
    assert ids[0] == tok.bos_id
    assert tok.decode([*ids[1:], tok.eos_id, 3]) == "ab>"
    with pytest.raises(ValueError):
        tok.encode("z")


# -- sampling ------------------------------------------------------------------------------------------


def test_samples_depend_on_their_seed_only_not_on_the_batch() -> None:
    tok = CharTokenizer("abcd>")
    backend = TorchGenerationBackend(ModelSpec("tiny", tok.vocab_size, seed=3), tok.pad_id, tok.eos_id)
    prompts = [tok.encode("abc>"), tok.encode("d>"), tok.encode("bb>")]
    seeds = [sample_seed(1, 5, i) for i in range(3)]
    whole = backend.generate(prompts, seeds, 4)
    alone = backend.generate(prompts[1:2], seeds[1:2], 4)
    assert alone.tokens[0] == whole.tokens[1]
    assert alone.logprobs[0] == pytest.approx(whole.logprobs[1], abs=1e-5)
    assert all(lp <= 0 for row in whole.logprobs for lp in row)


def test_pack_batch_aligns_response_mask_with_targets() -> None:
    b = pack_batch([[1, 5], [1, 6, 7]], [[8, 2], [9]], [[-0.1, -0.2], [-0.3]], [1.0, -1.0], pad_id=0)
    ids, m = b["input_ids"], b["response_mask"]
    # the target at index j is ids[:, j+1]; masked targets are exactly the response tokens
    assert ids[0][1:][m[0].bool()].tolist() == [8, 2]
    assert ids[1][1:][m[1].bool()].tolist() == [9]
    assert b["sampler_logprobs"][0][m[0].bool()].tolist() == pytest.approx([-0.1, -0.2])


def test_vllm_is_never_imported_on_the_cpu_path() -> None:
    # a fresh interpreter: the vLLM tests import vllm into this one
    code = "import sys, trainer.driver; sys.exit('vllm' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2], timeout=300)
    assert r.returncode == 0, "importing trainer.driver imported vllm"


# -- caches -----------------------------------------------------------------------------------------


def test_cache_check_names_each_unusable_dir(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    env = {"HF_HOME": str(tmp_path), "TORCH_HOME": str(tmp_path / "missing"), "TRITON_CACHE_DIR": str(ro)}
    os.chmod(ro, 0o500)
    try:
        res = {c.name: c for c in check_caches(env)}
    finally:
        os.chmod(ro, 0o700)
    assert res["HF_HOME"].ok
    assert not res["TORCH_HOME"].ok and res["TORCH_HOME"].reason == "does not exist"
    if os.geteuid() != 0:  # root can write anywhere
        assert not res["TRITON_CACHE_DIR"].ok
    assert "XDG_CACHE_HOME" not in res
