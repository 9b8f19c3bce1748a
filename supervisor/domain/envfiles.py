"""KEY=VALUE secret files (a spec's `env_files`, a run's kept `pass_env`, the daemon's Slack token file), read
only when private to their owner, so a secret reaches a job without its value ever being written into a spec.

The format is the common subset of systemd's `EnvironmentFile=` and docker's `--env-file`: one `KEY=VALUE` per
line, `export ` allowed before the key, blank lines and `#` comments skipped, a value optionally in matching
single or double quotes (taken literally: nothing is expanded, no escapes). Errors name the file and line and
never quote a value.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_ENV_FILE_BYTES = 64 * 1024


class EnvFileError(ValueError):
    """An env file that cannot be used: missing, not private to its owner, or not KEY=VALUE lines."""


def parse_env_text(text: str, source: str) -> dict[str, str]:
    """`KEY=VALUE` lines -> a dict (pure); raises EnvFileError at the first bad line (`source:line: ...`)."""
    out: dict[str, str] = {}
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep:
            raise EnvFileError(f"{source}:{no}: expected KEY=VALUE")
        if not ENV_KEY_RE.fullmatch(key):
            raise EnvFileError(f"{source}:{no}: {key[:60]!r} is not a valid environment variable name")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if "\x00" in value:
            raise EnvFileError(f"{source}:{no}: {key}: the value holds a NUL byte")
        out[key] = value
    return out


def private_problem(st: os.stat_result, path: Path) -> str | None:
    """Why a file with these stat results may not hold secrets, or None (pure)."""
    if not stat.S_ISREG(st.st_mode):
        return f"{path}: not a regular file"
    if st.st_uid != os.getuid():
        return f"{path}: owned by uid {st.st_uid}, not by you (uid {os.getuid()})"
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        return (
            f"{path}: readable or writable by group or others (mode {stat.S_IMODE(st.st_mode):o}); "
            f"it holds secrets: `chmod 600 {path}`"
        )
    return None


def read_private_env_file(path: Path) -> dict[str, str]:
    """Read a secret file, refusing one that is not private to this user (mode 600 or stricter, owned by
    us, not a symlink). Raises EnvFileError with a located message."""
    path = path.expanduser()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise EnvFileError(f"{path}: does not exist") from None
    except OSError as exc:
        why = "a symbolic link (name the file itself)" if os.path.islink(path) else exc.strerror
        raise EnvFileError(f"{path}: cannot read: {why}") from None
    try:
        problem = private_problem(os.fstat(fd), path)
        if problem:
            raise EnvFileError(problem)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_ENV_FILE_BYTES + 1)
    except OSError as exc:
        raise EnvFileError(f"{path}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > MAX_ENV_FILE_BYTES:
        raise EnvFileError(f"{path}: too large (over {MAX_ENV_FILE_BYTES} bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EnvFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return parse_env_text(text, str(path))


def render_env_text(env: Mapping[str, str]) -> str:
    """The inverse of parse_env_text for values without newlines (pass_env's kept file)."""
    for key, value in env.items():
        if not ENV_KEY_RE.fullmatch(key) or "\n" in value or "\r" in value or "\x00" in value:
            raise EnvFileError(f"{key}: cannot be kept in an env file (a newline or NUL in its value)")
    return "".join(f"{k}='{v}'\n" if "'" not in v else f'{k}="{v}"\n' for k, v in env.items())


def write_private_env_file(path: Path, env: Mapping[str, str]) -> None:
    """Write `env` to `path` created 0600 (never readable by others, not even for a moment)."""
    text = render_env_text(env)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


PASS_ENV_FILE = "pass_env.env"  # beside the run's spec.yaml: the pass_env values `shepherd submit` took


def read_secret_env(env_files: Sequence[Path], pass_env: Sequence[str], kept: Path) -> dict[str, str]:
    """A run's secrets for one submission: its env_files in order, then its pass_env names from `kept` (the
    run's pass_env.env). Raises EnvFileError, located, when one cannot be used or a name is missing."""
    out: dict[str, str] = {}
    for path in env_files:
        out.update(read_private_env_file(path))
    if pass_env:
        passed = read_private_env_file(kept)
        missing = [n for n in pass_env if n not in passed]
        if missing:
            raise EnvFileError(f"{kept}: holds no {', '.join(missing)} (pass_env)")
        out.update({n: passed[n] for n in pass_env})
    return out
