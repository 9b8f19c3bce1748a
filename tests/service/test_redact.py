"""redact(): no credential survives, ordinary training text does."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from supervisor.redact import (
    MASK,
    add_known_secrets,
    clear_known_secrets,
    is_secret_key,
    redact,
    redact_argv,
    redact_env,
)

_AWS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("posting with xoxb-1234567890-0987654321-AbCdEfGhIj", "1234567890-0987654321-AbCdEfGhIj"),
        ("user token xoxp-11-22-33-abcdef123456", "11-22-33-abcdef123456"),
        ("socket mode xapp-1-A0123-456-abcdefabcdef", "1-A0123-456-abcdefabcdef"),
        ("refresh xoxe.xoxp-1-Mi0yLTE0NjA", "1-Mi0yLTE0NjA"),
        ("rotating xoxe-1-My0xLTE0NjA5ODA", "1-My0xLTE0NjA5ODA"),
        ("git clone https://ghp_R2D2c3poABCDEFGHIJ0123456789@github.com/x", "R2D2c3poABCDEFGHIJ0123456789"),
        ("gho_abcdefghijklmnopqrstuvwxyz0123", "abcdefghijklmnopqrstuvwxyz0123"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "11ABCDEFG0123456789_abcdefghijklmnop"),
        ("login with hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "AbCdEfGhIjKlMnOpQrStUvWxYz012345"),
        ("OPENAI sk-proj-abcdefghijklmnop_QRSTUV-0123", "abcdefghijklmnop_QRSTUV-0123"),
        ("aws AKIAIOSFODNN7EXAMPLE id", "IOSFODNN7EXAMPLE"),
        ("Authorization: Bearer eyJhbGciOi.JIUzI1NiJ9.abcDEF", "JIUzI1NiJ9"),
        ("curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", "dXNlcjpwYXNzd29yZA=="),
        ("fetching https://alice:correct-horse@nas.example/data", "correct-horse"),
        ("post to https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX", "XXXXXXXXXXXXXXXX"),
        ("SLACK_BOT_TOKEN=abc123 python train.py", "abc123"),
        ("export WANDB_API_KEY='0123456789abcdef'", "0123456789abcdef"),
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI/K7MDENG"),
        ("DB_PASSWORD=hunter2 DB_USER=bob", "hunter2"),
        ("GCP_CREDENTIALS=/etc/gcp/creds.json", "/etc/gcp/creds.json"),
        ('{"client_secret": "s3cr3t-value", "step": 4}', "s3cr3t-value"),
        ("{'apiKey': 'k-998877'}", "k-998877"),
        ("https://api.example/v1?access_token=zzz999&page=2", "zzz999"),
        ("mlflow --password swordfish --port 5000", "swordfish"),
        ("password: opensesame", "opensesame"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAK\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAK"),
    ],
)
def test_known_credential_shapes_are_masked(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out
    assert MASK in out


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens=512 tokenizer=Qwen2 num_tokens=77",
        "step=40 reward=0.31 kl=0.02 lr=3e-4",
        "monkey=1 keys=3 tokens_per_s=900",
        "train/token_mult_prob_error=2.873 train:token_mult_prob_error = 2.87 > 1.2 at step 11",
        "task-abcdefghijklmnopqrstuvwx finished",
        "srun: error: node7: task 0: Out Of Memory",
        "https://github.com/org/repo/pull/12",
        "loaded checkpoint /scratch/runs/grpo-7/step_00040",
    ],
)
def test_ordinary_training_text_is_untouched(text: str) -> None:
    assert redact(text) == text


def test_env_assignment_keeps_the_name_and_masks_the_value() -> None:
    assert redact("FOO_TOKEN=abc") == "FOO_TOKEN=***"
    assert redact('HF_TOKEN="hf_xyz"') == 'HF_TOKEN="***"'


def test_token_keeps_a_recognisable_prefix() -> None:
    assert redact("xoxb-123456-abcdef") == "xoxb-***"


def test_extra_secrets_are_masked_exactly_and_short_ones_ignored() -> None:
    out = redact("pw is Tr0ub4dor&3 and id is abc", extra_secrets=["Tr0ub4dor&3", "abc"])
    assert "Tr0ub4dor&3" not in out
    assert out.endswith("id is abc")  # 3 chars is too short to be a secret: masking it would shred text


def test_known_secrets_apply_to_every_call() -> None:
    add_known_secrets(["zebra-stripes-42"])
    try:
        assert redact("value zebra-stripes-42 here") == f"value {MASK} here"
    finally:
        clear_known_secrets()
    assert redact("value zebra-stripes-42 here") == "value zebra-stripes-42 here"


def test_redact_env_masks_secret_named_keys_and_redacts_other_values() -> None:
    env = {
        "SLACK_APP_TOKEN": "plain",
        "HOME": "/home/u",
        "PIP_INDEX_URL": "https://u:pw123456@pypi.internal/simple",
        "EMPTY_TOKEN": "",
    }
    out = redact_env(env)
    assert out == {
        "SLACK_APP_TOKEN": MASK,
        "HOME": "/home/u",
        "PIP_INDEX_URL": "https://u:***@pypi.internal/simple",
        "EMPTY_TOKEN": "",
    }


def test_redact_argv_masks_the_word_after_a_secret_flag() -> None:
    argv = ["python", "t.py", "--api-key", "k-abcdef", "--lr", "3e-4", "--hf-token=hf_x", "DB_PASSWORD=pw"]
    assert redact_argv(argv) == [
        "python",
        "t.py",
        "--api-key",
        "***",
        "--lr",
        "3e-4",
        "--hf-token=***",
        "DB_PASSWORD=***",
    ]


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("SLACK_BOT_TOKEN", True),
        ("aws_secret_access_key", True),
        ("apiKey", True),
        ("DBPASSWORD", True),
        ("gcp-credentials", True),
        ("max_tokens", False),
        ("token_mult_prob_error", False),  # NeMo RL's metric, which a health alert quotes
        ("SLACK_TOKEN_RATE", False),
        ("TOKEN_ERRORS_SECRET", True),
        ("tokenizer", False),
        ("monkey", False),
        ("PATH", False),
    ],
)
def test_is_secret_key(name: str, secret: bool) -> None:
    assert is_secret_key(name) is secret


def test_redact_is_idempotent() -> None:
    text = "SLACK_BOT_TOKEN=xoxb-1-2-abcdefgh https://a:bcdefg@h ghp_abcdefghijklmnopqrstuv"
    once = redact(text)
    assert redact(once) == once


_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_body = st.text(alphabet=ALNUM, min_size=24, max_size=40)
_tokens = st.one_of(
    st.tuples(st.sampled_from(["xoxb-", "xoxp-", "xapp-1-", "xoxe-1-", "xoxa-2-"]), _body),
    st.tuples(st.sampled_from(["ghp_", "gho_", "ghs_", "github_pat_"]), _body),
    st.tuples(st.just("hf_"), _body),
    st.tuples(st.just("AKIA"), st.text(alphabet=_AWS, min_size=16, max_size=16)),
)


@settings(max_examples=300, deadline=None)
@given(prefix=_text, token=_tokens, suffix=_text)
def test_a_token_embedded_anywhere_never_survives(prefix: str, token: tuple[str, str], suffix: str) -> None:
    head, body = token
    assume(body not in prefix and body not in suffix)  # the check below looks for the embedded copy
    out = redact(prefix + head + body + suffix)
    assert body not in out


@settings(max_examples=200, deadline=None)
@given(
    prefix=_text.map(lambda s: s + " "),
    body=st.text(alphabet=ALNUM + "-_", min_size=20, max_size=40),
    suffix=_text,
)
def test_an_sk_key_after_a_separator_never_survives(prefix: str, body: str, suffix: str) -> None:
    assume(body not in prefix and body not in suffix)
    assert body not in redact(prefix + "sk-" + body + suffix)


@settings(max_examples=200, deadline=None)
@given(
    prefix=_text.map(lambda s: s + "\n"),
    name=st.sampled_from(["HF_TOKEN", "MY_API_KEY", "DB_PASSWORD", "CLIENT_SECRET", "AZURE_CREDENTIAL"]),
    value=st.text(alphabet=ALNUM + "/+.~", min_size=6, max_size=30),
    suffix=_text.map(lambda s: " " + s),
)
def test_an_env_assignment_value_never_survives(prefix: str, name: str, value: str, suffix: str) -> None:
    out = redact(f"{prefix}{name}={value}{suffix}")
    assert f"{name}={value}" not in out
    assert f"{name}=***" in out


@settings(max_examples=200, deadline=None)
@given(text=_text, secret=st.text(min_size=6, max_size=20).filter(lambda s: s.strip() == s and "*" not in s))
def test_an_extra_secret_never_survives(text: str, secret: str) -> None:
    assert secret not in redact(text + secret + text, extra_secrets=[secret])


@pytest.mark.timeout(60)  # each took seconds to minutes when the patterns rescanned words per start
@pytest.mark.parametrize(
    "text",
    [
        "a" * 60_000,
        "a." * 30_000,
        "a:" * 30_000,
        "a=b" * 20_000,
        "a-" * 30_000,
        "-a" * 30_000,
        "token=" * 10_000,
    ],
)
def test_redaction_is_linear_in_a_long_hostile_line(text: str) -> None:
    # found by bench/fuzz.py ("said"): everything the daemon logs or sends to Slack goes through redact()
    out = redact(text + " password=hunter2")
    assert out.endswith("password=***")
