"""The tailer: complete lines only, exact resumption from saved cursors, rotation, truncation, deletion."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from supervisor.watch.lines import normalise_chunk
from supervisor.watch.tailer import FileCursor, Follower, MemoryCursorStore, Tailer


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


Numbered = list[tuple[int, str]]


def read_all(tailer: Tailer, path: Path, cursor: FileCursor | None) -> tuple[Numbered, FileCursor | None]:
    out: list[tuple[int, str]] = []
    while True:
        res = tailer.read(path, cursor)
        out.extend((n, line.text) for n, line in res.lines())
        cursor = res.cursor
        if not res.more:
            return out, cursor


@pytest.fixture
def tailer() -> Iterator[Tailer]:
    t = Tailer(flush_partial_after_s=None)
    yield t
    t.close()


def test_reads_numbered_complete_lines_and_holds_back_a_partial_one(tmp_path: Path, tailer: Tailer) -> None:
    log = tmp_path / "ray-driver.log"
    log.write_bytes(b"one\ntwo\nthr")
    res = tailer.read(log, None)
    assert [(n, line.text) for n, line in res.lines()] == [(1, "one"), (2, "two")]
    assert res.cursor == FileCursor(log.stat().st_ino, 8, 2)
    append(log, b"ee\nfour\n")
    res = tailer.read(log, res.cursor)
    assert [(n, line.text) for n, line in res.lines()] == [(3, "three"), (4, "four")]


def test_nothing_new_returns_no_lines_and_the_same_cursor(tmp_path: Path, tailer: Tailer) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"x\n")
    first = tailer.read(log, None)
    again = tailer.read(log, first.cursor)
    assert again.n_lines == 0
    assert again.cursor == first.cursor


def test_restart_from_saved_cursor_neither_repeats_nor_misses(tmp_path: Path) -> None:
    log = tmp_path / "slurm-7.out"
    store = MemoryCursorStore()
    log.write_bytes(b"a\nb\npart")
    f1 = Follower(store, Tailer(flush_partial_after_s=None))
    res = f1.poll(log)
    assert [line.text for _, line in res.lines()] == ["a", "b"]
    f1.commit(res)
    f1.tailer.close()
    append(log, b"ial\nc\n")  # written while the daemon is down
    f2 = Follower(store, Tailer(flush_partial_after_s=None))  # "restarted daemon" with the same store
    res = f2.poll(log)
    assert [(n, line.text) for n, line in res.lines()] == [(3, "partial"), (4, "c")]
    f2.commit(res)
    assert f2.poll(log).n_lines == 0
    f2.tailer.close()


def test_uncommitted_lines_are_read_again_after_a_crash(tmp_path: Path) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"a\n")
    store = MemoryCursorStore()
    Follower(store, Tailer()).poll(log)  # read but never committed
    res = Follower(store, Tailer()).poll(log)
    assert [line.text for _, line in res.lines()] == ["a"]


def test_truncation_restarts_from_the_top(tmp_path: Path, tailer: Tailer) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"old line one\nold line two\n")
    res = tailer.read(log, None)
    with open(log, "wb") as fh:  # truncate in place (same inode), like `> file` or copytruncate
        fh.write(b"new\n")
    res = tailer.read(log, res.cursor)
    assert "truncated" in res.events
    assert [(n, line.text) for n, line in res.lines()] == [(1, "new")]


def test_a_log_truncated_and_written_past_the_old_offset_is_read_again_from_the_top(
    tmp_path: Path, tailer: Tailer
) -> None:
    """NeMo RL truncates ray-driver.log for each attempt (`>` keeps the inode): a new attempt that has
    written more than the old one by the next read is new content, never lines lost."""
    f = tmp_path / "ray-driver.log"
    f.write_bytes(b"attempt 1 line a\nattempt 1 line b\n")
    first = tailer.read(f, None)
    with f.open("r+b") as fh:  # truncate in place, then write more than before
        fh.truncate(0)
        fh.write(b"attempt 2 starts here\n" + b"attempt 2 line\n" * 5)
    again = tailer.read(f, first.cursor)
    assert "truncated" in again.events
    texts = [line.text for _n, line in again.lines()]
    assert texts[0] == "attempt 2 starts here" and len(texts) == 6


def test_rotation_drains_the_old_file_before_reading_the_new_one(tmp_path: Path, tailer: Tailer) -> None:
    log = tmp_path / "ray-head.log"
    log.write_bytes(b"a\n")
    res = tailer.read(log, None)
    append(log, b"b\nlast words")  # written just before rotation, partial last line included
    os.rename(log, tmp_path / "ray-head.log.1")
    log.write_bytes(b"fresh\n")
    res = tailer.read(log, res.cursor)
    assert "rotated" in res.events
    assert [[(n, line.text) for n, line in b] for b in res.batches] == [
        [(2, "b"), (3, "last words")],
        [(1, "fresh")],
    ]
    assert res.cursor == FileCursor(log.stat().st_ino, 6, 1)


def test_rotation_while_the_daemon_was_down_finds_the_renamed_file(tmp_path: Path) -> None:
    log = tmp_path / "ray-worker-0.log"
    log.write_bytes(b"a\n")
    store = MemoryCursorStore()
    f1 = Follower(store, Tailer())
    f1.commit(f1.poll(log))
    f1.tailer.close()
    append(log, b"missed?\n")
    os.rename(log, tmp_path / "ray-worker-0.log.1")
    log.write_bytes(b"new\n")
    f2 = Follower(store, Tailer())
    res = f2.poll(log)
    assert [line.text for _, line in res.lines()] == ["missed?", "new"]
    f2.tailer.close()


def test_deleted_file_is_drained_through_the_open_descriptor(tmp_path: Path, tailer: Tailer) -> None:
    log = tmp_path / "a.log"
    log.write_bytes(b"a\n")
    res = tailer.read(log, None)
    append(log, b"b\n")
    log.unlink()
    res = tailer.read(log, res.cursor)
    assert "deleted" in res.events
    assert [line.text for _, line in res.lines()] == ["b"]
    again = tailer.read(log, res.cursor)
    assert again.n_lines == 0 and "missing" in again.events


def test_file_that_does_not_exist_yet_has_no_cursor_then_is_read_from_the_start(
    tmp_path: Path, tailer: Tailer
) -> None:
    log = tmp_path / "123-logs" / "ray-driver.log"
    res = tailer.read(log, None)
    assert res.cursor is None and res.n_lines == 0
    log.parent.mkdir()
    log.write_bytes(b"hello\n")
    res = tailer.read(log, res.cursor)
    assert [line.text for _, line in res.lines()] == ["hello"]


def test_a_stale_partial_line_is_flushed_and_its_continuation_is_a_new_line(tmp_path: Path) -> None:
    clock = FakeClock()
    tailer = Tailer(flush_partial_after_s=5.0, clock=clock)
    log = tmp_path / "a.log"
    log.write_bytes(b"done\nFATAL: dying words")
    res = tailer.read(log, None)
    assert [line.text for _, line in res.lines()] == ["done"]
    clock.now += 1
    res = tailer.read(log, res.cursor)
    assert res.n_lines == 0
    clock.now += 5
    res = tailer.read(log, res.cursor)
    assert [(n, line.text) for n, line in res.lines()] == [(2, "FATAL: dying words")]
    assert "flushed" in res.events
    append(log, b" and more\n")
    res = tailer.read(log, res.cursor)
    # leading spaces are kept (tracebacks indent)
    assert [(n, line.text) for n, line in res.lines()] == [(3, " and more")]
    tailer.close()


def test_a_tqdm_line_without_newline_stays_bounded_and_keeps_spliced_errors(tmp_path: Path) -> None:
    tailer = Tailer(max_line_bytes=1000, flush_partial_after_s=None)
    log = tmp_path / "slurm.err"
    log.write_bytes(b"")
    cursor = None
    for i in range(200):
        bar = f"\rCollecting rollouts: {i // 2:3d}%|#    | {i}/200 [00:0{i % 10}<00:10, 4.73it/s]"
        append(log, bar.encode())
        if i == 50:
            append(log, b"\r[E ProcessGroupNCCL.cpp:1] Watchdog caught collective operation timeout")
        cursor = tailer.read(log, cursor).cursor
    partial = tailer._partial[str(log)]
    assert len(partial.buf) <= 1000 and partial.dropped == 0
    append(log, b"\n")
    res = tailer.read(log, cursor)
    (text,) = [line.text for _, line in res.lines()]
    assert "Watchdog caught collective operation timeout" in text
    assert text.endswith("199/200 [00:09<00:10, 4.73it/s]")
    tailer.close()


def test_a_giant_line_is_cut_with_a_marker_and_the_next_line_is_intact(tmp_path: Path) -> None:
    tailer = Tailer(max_line_bytes=1000, read_size=4096, flush_partial_after_s=None)
    log = tmp_path / "a.log"
    log.write_bytes(b"before\n" + b"y" * 50_000 + b"\nafter\n")
    lines, cursor = read_all(tailer, log, None)
    assert lines[0] == (1, "before")
    assert lines[1] == (2, "y" * 1000 + "…[truncated 49000 bytes]")
    assert lines[2] == (3, "after")
    assert cursor is not None and cursor.offset == log.stat().st_size
    tailer.close()


def test_large_files_are_read_in_bounded_steps(tmp_path: Path) -> None:
    tailer = Tailer(read_size=1000, flush_partial_after_s=None)
    log = tmp_path / "a.log"
    log.write_bytes(b"".join(f"line {i}\n".encode() for i in range(1000)))
    res = tailer.read(log, None)
    assert res.more and 0 < res.n_lines < 1000
    lines, _ = read_all(tailer, log, None)
    assert [n for n, _ in lines] == list(range(1, 1001))
    assert lines[-1] == (1000, "line 999")
    tailer.close()


def test_invalid_utf8_and_ray_prefixes_flow_through_the_tailer(tmp_path: Path, tailer: Tailer) -> None:
    log = tmp_path / "ray-driver.log"
    log.write_bytes(b"(Worker pid=3, ip=10.0.0.1) bad \xff byte\n")
    res = tailer.read(log, None)
    ((_, line),) = list(res.lines())
    assert line.prefix == "(Worker pid=3, ip=10.0.0.1)" and line.text.startswith("bad ")


def test_raw_mode_hands_out_the_same_lines_as_bytes(tmp_path: Path) -> None:
    log = tmp_path / "ray-driver.log"
    content = b"(Worker pid=1) a\n\x1b[31mb\x1b[0m\nc\rd\n" + b"z" * 3000 + b"\npartial"
    log.write_bytes(content)
    raw = Tailer(raw=True, max_line_bytes=1000, flush_partial_after_s=None)
    cooked = Tailer(max_line_bytes=1000, flush_partial_after_s=None)
    r = raw.read(log, None)
    c = cooked.read(log, None)
    assert r.cursor == c.cursor and r.n_lines == c.n_lines == 4
    (chunk,) = r.raw
    assert chunk.first_line == 1 and chunk.data.startswith(b"(Worker pid=1) a\n")
    assert b"partial" not in chunk.data
    assert normalise_chunk(chunk.data).texts == [line.text for _, line in c.lines()]
    raw.close()
    cooked.close()


def test_raw_mode_cuts_a_giant_partial_line_with_a_marker(tmp_path: Path) -> None:
    tailer = Tailer(raw=True, max_line_bytes=100, read_size=64, flush_partial_after_s=None)
    log = tmp_path / "a.log"
    log.write_bytes(b"q" * 1000 + b"\nnext\n")
    data = b""
    cursor = None
    while True:
        res = tailer.read(log, cursor)
        data += b"".join(c.data for c in res.raw)
        cursor = res.cursor
        if not res.more:
            break
    assert data == b"q" * 100 + "…[truncated 900 bytes]".encode() + b"\nnext\n"
    assert cursor is not None and cursor.line_no == 2
    tailer.close()


def test_flush_emits_the_last_words_of_an_ended_job_at_once(tmp_path: Path, tailer: Tailer) -> None:
    log = tmp_path / "slurm-5.out"
    log.write_bytes(b"ok\nslurmstepd: error: *** JOB 5 ON n1 CANCELLED AT 2026 DUE TO TIME LIMIT ***")
    res = tailer.read(log, None)
    assert [line.text for _, line in res.lines()] == ["ok"]
    assert tailer.pending_partials() == [str(log)]
    res = tailer.read(log, res.cursor, flush=True)
    assert [(n, line.text) for n, line in res.lines()] == [
        (2, "slurmstepd: error: *** JOB 5 ON n1 CANCELLED AT 2026 DUE TO TIME LIMIT ***")
    ]
    assert res.cursor is not None and res.cursor.offset == log.stat().st_size
    assert tailer.pending_partials() == []


def test_a_running_bar_can_be_peeked_without_consuming_it(tmp_path: Path, tailer: Tailer) -> None:
    log = tmp_path / "slurm-5.err"
    log.write_bytes(
        b"start\n\rgen:  10%|#  | 1/10 [00:01<00:09, 1.00it/s]\rgen:  20%|## | 2/10 [00:02<00:08, 1.00it/s]"
    )
    res = tailer.read(log, None)
    assert tailer.partial_text(log) == "gen:  20%|## | 2/10 [00:02<00:08, 1.00it/s]"
    again = tailer.read(log, res.cursor)
    assert again.n_lines == 0 and again.cursor == res.cursor


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.binary(max_size=400),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_append_pattern_gives_one_reads_lines(tmp_path: Path, content: bytes, cuts: list[int]) -> None:
    log = tmp_path / f"h{abs(hash((content, tuple(cuts))))}.log"
    log.write_bytes(b"")
    tailer = Tailer(flush_partial_after_s=None, read_size=37)
    got: list[tuple[int, str]] = []
    cursor = None
    pos = 0
    for cut in [*sorted(cuts), len(content)]:
        cut = min(max(cut, pos), len(content))
        append(log, content[pos:cut])
        pos = cut
        lines, cursor = read_all(tailer, log, cursor)
        got += lines
    tailer.close()
    whole = content[: content.rfind(b"\n") + 1]
    assert got == list(enumerate(normalise_chunk(whole).texts, start=1))


def test_a_fifo_is_refused_instead_of_blocking(tmp_path: Path, tailer: Tailer) -> None:
    fifo = tmp_path / ".driver-out.123"
    os.mkfifo(fifo)
    with pytest.raises(OSError):
        tailer.read(fifo, None)
