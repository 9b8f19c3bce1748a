"""The polling plan keeps a budget of filesystem operations, and still finds a line written into any file.

The plan is driven through `ChangeSource.poll_due` with a fake clock and a counting fake filesystem (the
`FsProbe` port), so every operation the watcher would make is counted by the fake, not by the plan itself.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

import pytest

from supervisor.watch.fswatch import LISTING_OPS, ChangeSource, FileSig, Folder
from supervisor.watch.pollplan import Cadence, PollPlan

BUDGET = 100.0
STEP_S = 0.05  # the simulated poll loop wakes this often (the real one sleeps until the plan's next_wake)


@dataclass
class FakeFs:
    """Files as (inode, size, mtime) and folders as name sets; counts what a probe costs on a real mount."""

    now: float = 0.0
    files: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    folders: dict[str, set[str]] = field(default_factory=dict)
    folder_mtime: dict[str, float] = field(default_factory=dict)
    ops: Counter[str] = field(default_factory=Counter)
    log: list[tuple[float, int]] = field(default_factory=list)  # (time, ops) of every call

    def _count(self, kind: str, n: int) -> None:
        self.ops[kind] += n
        self.log.append((self.now, n))

    def append(self, path: str, n: int = 80) -> None:
        ino, size, _ = self.files.get(path, (len(self.files) + 1, 0, 0))
        self.files[path] = (ino, size + n, int(self.now * 1e9))

    def mkfile(self, folder: str, name: str) -> str:
        self.folders.setdefault(folder, set()).add(name)
        self.folder_mtime[folder] = self.now
        path = os.path.join(folder, name)
        self.append(path)
        return path

    # the FsProbe port
    def file(self, path: str) -> FileSig:
        self._count("open", 1)
        return self.files.get(path)

    def folder(self, path: str, last: Folder | None) -> Folder | None:
        self._count("open", 1)
        if path not in self.folders:
            return None
        stamp = (1, int(self.folder_mtime[path] * 1e9))
        if last is not None and last.trusted and last.stamp == stamp:
            return last
        self._count("listing", LISTING_OPS)
        return Folder(stamp, frozenset(self.folders[path]), self.now - self.folder_mtime[path] > 3.0)

    def most_in_window(self, window_s: float) -> int:
        """The most operations made in any `window_s` stretch."""
        best, lo, total = 0, 0, 0
        for t, n in self.log:
            total += n
            while self.log[lo][0] <= t - window_s:
                total -= self.log[lo][1]
                lo += 1
            best = max(best, total)
        return best


@dataclass
class Run:
    folder: str
    driver: str  # written every second
    quiet: list[str]  # written once at the start, then silent


def cluster(n_runs: int, fs: FakeFs) -> tuple[ChangeSource, list[Run]]:
    src = ChangeSource(
        force_polling=True,
        cadence=Cadence(ops_per_s=BUDGET),
        probe=fs,
        clock=lambda: fs.now,
        wall=lambda: fs.now,
    )
    runs = []
    for i in range(n_runs):
        folder = f"/lustre/runs/r{i}/{1000 + i}-logs"
        driver = fs.mkfile(folder, "ray-driver.log")
        quiet = [fs.mkfile(folder, f"ray-worker-{k}.log") for k in range(4)]
        out = fs.mkfile(f"/lustre/runs/r{i}", f"slurm-{1000 + i}.out")
        quiet.append(out)
        for p in [driver, *quiet]:
            src.add(p, group=i)
        src.add(folder, is_dir=True, group=i)
        runs.append(Run(folder, driver, quiet))
    return src, runs


def run_for(
    src: ChangeSource, fs: FakeFs, seconds: float, writers: list[str], seen: dict[str, float]
) -> None:
    """Advance the clock; `writers` append once a second; record when each path was last reported."""
    end = fs.now + seconds
    next_write = fs.now
    while fs.now < end:
        if fs.now >= next_write:
            for p in writers:
                fs.append(p)
            next_write += 1.0
        for p in src.poll_due():
            seen[p] = fs.now
        fs.now = round(fs.now + STEP_S, 6)


def latency_of_a_write(src: ChangeSource, fs: FakeFs, path: str, writers: list[str], limit_s: float) -> float:
    fs.append(path)
    written = fs.now
    seen: dict[str, float] = {}
    while path not in seen and fs.now < written + limit_s:
        run_for(src, fs, STEP_S, writers, seen)
    assert path in seen, f"{path} not reported within {limit_s} s"
    return seen[path] - written


@pytest.mark.parametrize("n_runs", [10, 100, 500])
def test_the_operation_budget_holds_whatever_the_number_of_runs(n_runs: int) -> None:
    fs = FakeFs()
    src, runs = cluster(n_runs, fs)
    writers = [r.driver for r in runs]
    run_for(src, fs, 90.0, writers, {})
    spent = sum(n for _, n in fs.log)
    burst = BUDGET * src.plan.cadence.burst_s
    # over the whole run and over any 5 s stretch: the budget's share, plus what may be saved up (a quarter
    # second's worth) and one listing, which is paid for after it was made
    assert spent <= BUDGET * 90.0 + burst + LISTING_OPS
    assert fs.most_in_window(5.0) <= BUDGET * 5.0 + burst + LISTING_OPS
    if n_runs >= 100:
        assert spent / 90.0 >= 0.8 * BUDGET  # the budget is used, not left idle, when there is work


def test_an_active_file_is_seen_within_the_base_interval_when_the_budget_covers_it() -> None:
    fs = FakeFs()
    src, runs = cluster(100, fs)
    writers = [r.driver for r in runs]
    run_for(src, fs, 120.0, writers, {})
    load = src.load()
    assert load.covered, load
    assert load.active_files == 100  # the drivers; the quiet files backed off
    latencies = [latency_of_a_write(src, fs, r.driver, writers, 10.0) for r in runs[:20]]
    assert max(latencies) <= src.plan.cadence.base_s + STEP_S


def test_a_line_in_a_long_quiet_file_is_found_within_its_backed_off_interval() -> None:
    fs = FakeFs()
    src, runs = cluster(100, fs)
    writers = [r.driver for r in runs]
    run_for(src, fs, 300.0, writers, {})
    cadence = src.plan.cadence
    quiet = runs[7].quiet[0]
    assert src.plan.targets[quiet].interval == cadence.max_s  # quiet for 300 s: backed off all the way
    took = latency_of_a_write(src, fs, quiet, writers, 2 * cadence.max_s)
    assert took <= cadence.max_s + STEP_S
    # and once it changed it is back at the base interval
    assert src.plan.targets[quiet].interval == cadence.base_s


def test_a_quiet_file_backs_off_gradually_not_at_once() -> None:
    fs = FakeFs()
    src, runs = cluster(1, fs)
    run_for(src, fs, 10.0, [], {})
    interval = src.plan.targets[runs[0].driver].interval
    assert src.plan.cadence.base_s < interval <= 5.0 + STEP_S  # half of ~10 s quiet, not the 30 s cap


def test_when_the_budget_cannot_cover_the_base_interval_the_load_says_so() -> None:
    fs = FakeFs()
    src, runs = cluster(500, fs)  # 500 drivers every 2 s alone would be 250 operations/s
    writers = [r.driver for r in runs]
    run_for(src, fs, 60.0, writers, {})
    load = src.load()
    assert not load.covered
    assert load.demand_ops_per_s >= 250
    assert load.shortfall_ops_per_s == pytest.approx(load.demand_ops_per_s - BUDGET)
    assert load.lag_s > 0  # the checks go out late, and the plan knows by how much
    # nothing starves: even over budget every driver's write is still seen, just later
    seen: dict[str, float] = {}
    for r in runs:
        fs.append(r.driver)
    run_for(src, fs, 60.0, [], seen)
    assert all(r.driver in seen for r in runs)


def test_a_pending_jobs_paths_cost_nothing_until_it_starts() -> None:
    fs = FakeFs()
    src, runs = cluster(10, fs)
    run_for(src, fs, 5.0, [], {})
    for i in range(10):
        src.pause(i)
    fs.log.clear()
    fs.append(runs[3].driver)
    seen: dict[str, float] = {}
    run_for(src, fs, 60.0, [], seen)
    assert fs.log == [] and seen == {}
    assert src.load().paused == 70  # 6 files and a folder per run
    src.resume(3)
    run_for(src, fs, STEP_S, [], seen)
    assert runs[3].driver in seen  # looked at at once when it starts
    assert 0 < sum(n for _, n in fs.log) <= 7 + LISTING_OPS  # its own 7 paths only


def test_a_new_worker_log_shows_in_the_folder_listing_on_its_slower_cadence() -> None:
    fs = FakeFs()
    src, runs = cluster(10, fs)
    run_for(src, fs, 150.0, [], {})
    listing = src.plan.targets[runs[0].folder]
    cadence = src.plan.cadence
    assert listing.kind == "listing" and cadence.max_s < listing.interval <= cadence.max_listing_s
    fs.now += 0.01
    new = fs.mkfile(runs[0].folder, "ray-worker-9.log")
    seen: dict[str, float] = {}
    run_for(src, fs, cadence.max_listing_s + STEP_S, [], seen)
    assert new in seen
    names = src.listing(runs[0].folder)
    assert names is not None and "ray-worker-9.log" in names


def test_an_unchanged_folder_is_not_listed_again() -> None:
    fs = FakeFs()
    src, _ = cluster(1, fs)
    run_for(src, fs, 200.0, [], {})
    assert fs.ops["listing"] == 2 * LISTING_OPS  # the first listing, and one when its mtime was old enough
    assert fs.ops["open"] > 10  # it was still looked at


def test_earliest_deadline_first_lets_a_hot_file_outrank_a_quiet_one() -> None:
    plan = PollPlan(Cadence(ops_per_s=1.0, burst_s=1.0), now=0.0)
    plan.add("quiet", None, "file", 0.0)
    plan.add("hot", None, "file", 0.0)
    assert sorted(plan.take(0.0) + plan.take(1.0)) == ["hot", "quiet"]
    plan.observed("quiet", False, 60.0)  # quiet for a minute: next due at 90 s, deadline 120 s
    plan.observed("hot", True, 60.0)  # changed: next due at 62 s, deadline 64 s
    assert plan.take(100.0) == ["hot"]  # both due, one token: the earlier deadline goes first


def test_a_settings_reload_changes_the_budget() -> None:
    plan = PollPlan(Cadence(ops_per_s=100.0), now=0.0)
    plan.set_cadence(Cadence(ops_per_s=10.0), now=0.0)
    for i in range(50):
        plan.add(f"f{i}", None, "file", 0.0)
    assert len(plan.take(0.0)) <= 10 * plan.cadence.burst_s + 1
    assert plan.load(0.0).budget_ops_per_s == 10.0


def test_an_invalid_cadence_is_refused_with_its_values() -> None:
    with pytest.raises(ValueError, match="ops_per_s=0"):
        Cadence(ops_per_s=0)


def test_a_progress_file_is_polled_on_its_own_slower_cadence() -> None:
    fs = FakeFs()
    src = ChangeSource(
        force_polling=True,
        cadence=Cadence(ops_per_s=BUDGET),
        probe=fs,
        clock=lambda: fs.now,
        wall=lambda: fs.now,
    )
    events = "/lustre/logs/exp_001/tensorboard/events.out.tfevents.1.host"
    driver = "/lustre/logs/ray-driver.log"
    src.add(events, progress=True)
    src.add(driver)
    seen: dict[str, float] = {}
    run_for(src, fs, 60.0, [events, driver], seen)  # both written every second
    cadence = src.plan.cadence
    assert src.plan.targets[events].interval == cadence.progress_s > cadence.base_s
    assert src.plan.targets[driver].interval == cadence.base_s
    assert src.load().progress_files == 1 and src.load().active_files == 1


def test_a_file_found_long_quiet_at_its_first_check_starts_backed_off() -> None:
    fs = FakeFs(now=3600.0)
    fs.files["/lustre/old.out"] = (1, 100, 0)  # last written an hour ago
    fs.append("/lustre/fresh.log")  # written just now
    src = ChangeSource(force_polling=True, probe=fs, clock=lambda: fs.now, wall=lambda: fs.now)
    src.add("/lustre/old.out")
    src.add("/lustre/fresh.log")
    assert src.poll_due() == {"/lustre/old.out", "/lustre/fresh.log"}  # both read once from their cursors
    assert src.plan.targets["/lustre/old.out"].interval == src.plan.cadence.max_s
    assert src.plan.targets["/lustre/fresh.log"].interval == src.plan.cadence.base_s
