"""The environment Slurm commands start with, built from scratch: sbatch exports its own environment into
the job (and slurmctld keeps it), so the daemon's own (its Slack tokens above all) must never reach one.

A job gets `base_environment` of the daemon's (PATH, HOME, USER, LOGNAME, LANG, LANGUAGE, LC_*, TZ and
SLURM_CONF, what sbatch needs to find the controller), then the spec's `env`, its `env_files` and `pass_env`,
the resume fix's env, then the launcher's and Shepherd's own variables (submit.py). Nothing else: not the
daemon's SBATCH_* (sbatch would read them as options), SLURM_* (a Slurm-hosted daemon's own job), SHEPHERD_*
settings, PYTHONPATH, VIRTUAL_ENV, TMPDIR (the login node's), nor any secret. docs/security.md says the same.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from supervisor.redact import MIN_SECRET_LEN, is_secret_key

BASE_NAMES = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "SLURM_CONF")
BASE_PREFIXES = ("LC_",)
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def in_base(name: str) -> bool:
    return name in BASE_NAMES or name.startswith(BASE_PREFIXES)


def base_environment(
    environ: Mapping[str, str],
    *,
    secret_names: Collection[str] = (),
    secret_values: Iterable[str] = (),
) -> dict[str, str]:
    """The documented base taken from `environ`, never holding a secret: a name redact calls secret, a name
    in `secret_names` (the settings' token variables) or a value holding one of `secret_values` is left out
    even if it is a base name. PATH is always set."""
    values = [v for v in secret_values if v and len(v) >= MIN_SECRET_LEN]
    out: dict[str, str] = {}
    for name, value in environ.items():
        if not in_base(name) or name in secret_names or is_secret_key(name):
            continue
        if any(s in value for s in values):
            continue
        out[name] = value
    out.setdefault("PATH", DEFAULT_PATH)
    return out
