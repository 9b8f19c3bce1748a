"""Mask secrets in any text before it leaves the daemon (logs, Slack, files).

Run logs and error messages routinely echo environment variables, URLs and
command lines; one leaked Slack or HF token in a channel is a revocation
incident. So every outgoing string goes through `redact()`, which masks
(1) values the daemon knows are secret (`extra_secrets`, `add_known_secrets`),
(2) token shapes of the common providers, (3) values assigned to keys whose
name says "secret" (``FOO_TOKEN=abc``, ``"password": "x"``, ``--api-key x``),
(4) the password part of ``scheme://user:password@host``.

Over-masking is preferred to under-masking, but ordinary training words
(``max_tokens``, ``tokenizer``, ``monkey``) are deliberately left alone.
A masked value keeps a short recognisable prefix (``xoxb-***``) so a human can
still tell which kind of credential was involved.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

MASK = "***"
MIN_SECRET_LEN = 6

# Words that make a key name secret when they appear as a whole word of it
# (SLACK_BOT_TOKEN, aws_secret_access_key, apiKey, --db-password ...).
_SECRET_WORDS = frozenset(
    {
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "credential",
        "credentials",
        "key",
        "apikey",
        "privatekey",
        "auth",
        "authorization",
        "cookie",
        "signature",
    }
)
# ... or as the tail of a glued word (SLACKTOKEN, dbpassword, myapikey).
_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "credential", "credentials", "apikey")

# ... unless the name ends in a word that says it is a measurement: NeMo RL's `token_mult_prob_error`, a
# `token_count` or a `key_rate` hold numbers people need to read in an alert, not credentials.
_MEASUREMENT_WORDS = frozenset(
    {"error", "errors", "rate", "ratio", "frac", "fraction", "count", "len", "length", "mean", "std", "prob"}
)

_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def is_secret_key(name: str) -> bool:
    """Whether a variable/field name says its value is a credential."""
    words = [w for w in _WORD_SPLIT.split(name) if w]
    if len(words) > 1 and words[-1].lower() in _MEASUREMENT_WORDS:
        return False
    for word in words:
        w = word.lower()
        if not w:
            continue
        if w in _SECRET_WORDS or w.endswith(_SECRET_SUFFIXES):
            return True
    return False


def _keep_prefix(prefix_group: int) -> Callable[[re.Match[str]], str]:
    def repl(m: re.Match[str]) -> str:
        return m.group(prefix_group) + MASK

    return repl


# Token shapes. Distinctive prefixes match anywhere (even glued to a word);
# short generic ones (sk-) need a non-alphanumeric character before them.
_TOKEN_PATTERNS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    # PEM private key blocks.
    (
        re.compile(
            r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL
        ),
        lambda m: f"-----BEGIN {m.group(1)}PRIVATE KEY-----{MASK}",
    ),
    # Slack: xoxb-/xoxp-/xoxa-/xoxs-/xoxe-, refresh tokens xoxe.xoxp-..., app tokens xapp-.
    (re.compile(r"(xox[a-z](?:\.xox[a-z])?-|xapp-)[A-Za-z0-9-]{6,}"), _keep_prefix(1)),
    # Slack incoming webhooks carry their secret in the path.
    (re.compile(r"(hooks\.slack\.com/(?:services|workflows|triggers)/)[A-Za-z0-9/_-]+"), _keep_prefix(1)),
    # GitHub classic (ghp_, gho_, ghu_, ghs_, ghr_) and fine-grained tokens.
    (re.compile(r"(gh[pousr]_)[A-Za-z0-9]{16,}"), _keep_prefix(1)),
    (re.compile(r"(github_pat_)[A-Za-z0-9_]{16,}"), _keep_prefix(1)),
    # Hugging Face.
    (re.compile(r"(hf_)[A-Za-z0-9]{16,}"), _keep_prefix(1)),
    # OpenAI-style keys (sk-..., sk-proj-..., sk-ant-...).
    (re.compile(r"(?<![A-Za-z0-9])(sk-)[A-Za-z0-9_-]{16,}"), _keep_prefix(1)),
    # AWS access key ids.
    (re.compile(r"(AKIA|ASIA)[A-Z0-9]{16}"), _keep_prefix(1)),
    # JWTs (three base64url parts, header starts with {" -> eyJ).
    (re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), lambda m: "eyJ" + MASK),
    # HTTP auth: the whole header value (Basic, Digest, token ...), then bare bearer tokens.
    (re.compile(r"(?i)(\bauthorization[\"']?[ \t]*[:=][ \t]*[\"']?)[^\r\n\"']+"), _keep_prefix(1)),
    (re.compile(r"(?i)\b(Bearer[ \t]+)[A-Za-z0-9._~+/=-]{8,}"), _keep_prefix(1)),
]

# scheme://user:password@host -> scheme://user:***@host. The scheme starts a word (the look-behind) and is
# taken whole (possessive): else every letter of a long word started a scan to its end (quadratic: 30,000
# letters took 2 s, and everything the daemon logs or sends goes through here).
_URL_USERINFO = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]*+://[^/\s:@]*+:)([^/\s@]+)@")

# KEY=value, "key": "value", key: value  (the key decides; see is_secret_key). Leading hyphens are part of
# the match (--password=x) so that a key never starts inside a hyphenated word; the value is matched only
# after a secret key, from where the key ends: a value scanned ahead for every key made `a:a:a:...` quadratic.
_VALUE = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'&;,)}\]]+")
_ASSIGN = re.compile(
    r"(?<![A-Za-z0-9_.-])-*+(?P<key>[A-Za-z_][A-Za-z0-9_.-]*+)(?P<q>[\"']?)(?P<sep>[ \t]*+[=:][ \t]*+)"
)
# --api-key value / -password value (command lines)
_FLAG_VALUE = re.compile(r"[^\s\"'-][^\s\"']*")
_FLAG = re.compile(r"(?<![A-Za-z0-9_-])(?P<key>--?[A-Za-z][A-Za-z0-9_.-]*+)(?P<sep>[ \t]++)")


def _mask_assignments(pattern: re.Pattern[str], value: re.Pattern[str], text: str) -> str:
    """Mask the value after each secret-named key.

    The value is matched only after a secret key, and a non-secret key (``https:``) consumes nothing, so
    the text after it, which may hold a secret key of its own (``?token=``), is still looked at.
    """
    out: list[str] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() < pos or not is_secret_key(m.group("key")):
            continue
        v = value.match(text, m.end())
        if v is None:
            continue
        val = v.group(0)
        if len(val) >= 2 and val[0] == val[-1] and val[0] in "\"'":
            masked = val[0] + MASK + val[0]
        else:
            masked = MASK
        out.append(text[pos : v.start()])
        out.append(masked)
        pos = v.end()
    out.append(text[pos:])
    return "".join(out)


_known_lock = threading.Lock()
_known_secrets: frozenset[str] = frozenset()


def add_known_secrets(values: Iterable[str]) -> None:
    """Register secrets loaded at start (Slack tokens, ...) so every redact() call masks them."""
    global _known_secrets
    new = {v for v in values if v and len(v) >= MIN_SECRET_LEN}
    if not new:
        return
    with _known_lock:
        _known_secrets = _known_secrets | new


def known_secrets() -> frozenset[str]:
    """The secrets registered so far (the daemon's tokens, its runs' env_files and pass_env values): what a
    job's environment is built without (slurm/jobenv.py)."""
    return _known_secrets


def clear_known_secrets() -> None:
    """For tests."""
    global _known_secrets
    with _known_lock:
        _known_secrets = frozenset()


def mask_known(text: str) -> str:
    """Only the values registered with `add_known_secrets` masked (a run's env_files and pass_env values, the
    daemon's tokens): cheap, and it leaves the rest of a log line as it was, so evidence stays readable."""
    known = _known_secrets
    if not text or not known:
        return text
    for secret in sorted(known, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def mask_known_in(obj: Any) -> Any:
    """`mask_known` over every string of a JSON-like value (what the store keeps as evidence)."""
    if isinstance(obj, str):
        return mask_known(obj)
    if isinstance(obj, dict):
        return {k: mask_known_in(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [mask_known_in(v) for v in obj]
    return obj


def redact(text: str, extra_secrets: Iterable[str] = ()) -> str:
    """Return `text` with every recognisable secret replaced by a mask."""
    if not text:
        return text
    exact = {s for s in extra_secrets if s and len(s) >= MIN_SECRET_LEN} | _known_secrets
    # Longest first, so a secret that contains another is masked whole.
    for secret in sorted(exact, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern, repl in _TOKEN_PATTERNS:
        text = pattern.sub(repl, text)
    text = _URL_USERINFO.sub(lambda m: m.group(1) + MASK + "@", text)
    text = _mask_assignments(_ASSIGN, _VALUE, text)
    text = _mask_assignments(_FLAG, _FLAG_VALUE, text)
    return text


def redact_env(env: Mapping[str, str], extra_secrets: Iterable[str] = ()) -> dict[str, str]:
    """Copy of an environment safe to log: secret-named keys masked, other values redacted."""
    extra = tuple(extra_secrets)
    out: dict[str, str] = {}
    for key, value in env.items():
        if is_secret_key(key) and value:
            out[key] = MASK
        else:
            out[key] = redact(value, extra)
    return out


def redact_argv(argv: Sequence[str], extra_secrets: Iterable[str] = ()) -> list[str]:
    """Redact a command line given as a list: the word after ``--api-key`` is a secret too."""
    extra = tuple(extra_secrets)
    out: list[str] = []
    secret_next = False
    for arg in argv:
        if secret_next and arg:
            out.append(MASK)
            secret_next = False
            continue
        secret_next = arg.startswith("-") and "=" not in arg and is_secret_key(arg.lstrip("-"))
        out.append(redact(arg, extra))
    return out
