"""Suite-wide rules: where the real parts must exist (CI, scripts/test), a test needing them may not skip
(the dev Slurm cluster, Ray, FUSE for the network-filesystem stand-in)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from supervisor.slurm.launchers.layout import HEAD_LOG
from tests.support.order import RAY_SUB_UNIT, Kind, SuiteFile, file_order, scope
from tests.support.raylock import holds_exclusive, ray_users, waits_file

REAL_PARTS = ("slurm", "ray", "vllm", "fuse")

# No SHEPHERD_* setting is given to every test here: a default the whole suite runs with is one no user has,
# and it hides what users see (preflight refusing a fresh clone's demo did). A test that needs a setting
# sets it for itself.


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    required = os.environ.get("SHEPHERD_REQUIRE_SLURM") == "1"
    needs_real_part = any(item.get_closest_marker(m) for m in REAL_PARTS)
    if required and report.skipped and needs_real_part:
        report.outcome = "failed"
        report.longrepr = (
            f"this run requires the real Slurm, Ray, vLLM and FUSE, but the test skipped: {report.longrepr}"
        )


# The exclusive hold a ray.sub unit's test passes on to the next test of the unit on its worker.
_passed_on = ExitStack()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Ray tests run beside each other; a `ray_stop` test (NeMo RL's ray.sub) runs alone among them. Taken
    outside pytest-timeout's clock (this wrapper is the outermost): a wait for a turn is not the test's.

    The worker that runs the ray.sub unit (tests/support/order.py) keeps the exclusive hold from one of the
    unit's tests to the next, its few tests of our own ray.sub included: released there, the hold went to a
    shared Ray test of another worker (a file of minutes), and the unit, the tier's longest chain, waited for
    it (164 s in the 2026-11-28 CI run)."""
    exclusive = item.get_closest_marker("ray_stop") is not None
    if not exclusive and item.get_closest_marker("ray") is None:
        _passed_on.close()
        yield
        return
    with ray_users(exclusive=exclusive, who=item.nodeid):
        _passed_on.close()  # this test holds it now (the lock is reentrant within the process)
        yield
        if holds_exclusive() and nextitem is not None and scope(nextitem.nodeid) == RAY_SUB_UNIT:
            _passed_on.enter_context(ray_users(exclusive=True, who=nextitem.nodeid))


def _ray_heads(base: Path) -> set[Path]:
    return set(base.rglob(f"*-logs/{HEAD_LOG}"))


@pytest.fixture(autouse=True)
def _slurm_tests_without_the_ray_marker_start_no_ray(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """A Slurm test that is not marked `ray` runs outside the Ray lock, so a Ray it starts can meet NeMo RL's
    ray.sub `ray stop` of another worker (four such tests did, through our ray.sub, the default launcher).
    Both ray.subs write `<jobid>-logs/ray-head.log` under the job's log folder, which the tests keep under
    this worker's temporary folder: one that appears while such a test runs fails it."""
    item = request.node
    if item.get_closest_marker("slurm") is None or item.get_closest_marker("ray") is not None:
        yield
        return
    base = tmp_path_factory.getbasetemp()
    before = _ray_heads(base)
    yield
    started = sorted(_ray_heads(base) - before)
    if started:
        pytest.fail(
            f"this test started Ray ({started[0]}) but is not marked `ray`: mark it, or submit with "
            "tests/support/plain.sub",
            pytrace=False,
        )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """A notes file left by an earlier session whose controller had this pid is not this session's."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        waits_file(os.getpid()).unlink(missing_ok=True)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """What the Ray lock cost this session: the tests that waited for it (a worker idle meanwhile, unless
    the wait is the scheduling's fault of no other work), so the order in tests/support/order.py can be
    judged by what happened, not guessed."""
    path = waits_file(os.getpid())
    if not path.exists():
        return
    rows = [
        line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.count("\t") == 2
    ]
    path.unlink(missing_ok=True)
    if not rows:
        return
    rows.sort(key=lambda r: -float(r[0]))
    total = sum(float(r[0]) for r in rows)
    terminalreporter.write_sep("=", f"Ray lock waits: {total:.0f}s over {len(rows)} tests")
    for seconds, mode, who in rows[:10]:
        terminalreporter.write_line(f"{float(seconds):7.1f}s {mode:9} {who}")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, with NeMo RL's ray.sub files as one unit (tests/support/order.py's `scope`): one
    worker runs them back to back, where two workers holding one each waited on the Ray lock."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class RaySubTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope(nodeid)

    return RaySubTogether(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The order xdist hands files out in (tests/support/order.py): longest first, NeMo RL's ray.sub files
    each beside a long file without Ray. A file's tests stay together and in their order.

    Last, after `-m` deselected the other tier's tests: run before, it counted the unit tier's files (365 s
    of them, never run in the integration tier) in the time that keeps the workers busy beside the ray.sub
    unit, so the Ray files were handed out early and waited for the lock (158 s, clean-ci of 2026-11-28)."""
    groups: dict[str, list[pytest.Item]] = {}
    for item in items:
        groups.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def describe(path: str, its: list[pytest.Item]) -> SuiteFile:
        kind: Kind = "plain"
        if any(i.get_closest_marker("ray_stop") for i in its):
            kind = "ray_stop"
        elif any(i.get_closest_marker("ray") for i in its):
            kind = "ray"
        real = any(i.get_closest_marker(m) for i in its for m in REAL_PARTS)
        return SuiteFile(path, kind, len(its), real)

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    order = file_order([describe(path, its) for path, its in groups.items()], workers)
    # In a file, its ray.sub tests first: a module fixture that takes the Ray lock exclusively is then set up
    # under a test that holds it so (a shared holder cannot upgrade).
    items[:] = [
        item
        for path in order
        for item in sorted(groups[path], key=lambda i: i.get_closest_marker("ray_stop") is None)
    ]
