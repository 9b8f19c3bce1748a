"""Normalisation of the log shapes seen in real failure reports (docs: real-failure-logs.md)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from supervisor.watch.lines import (
    SEGMENT_SEP,
    collapse_cr,
    is_bar_segment,
    normalise_chunk,
    normalise_line,
    split_prefix,
)


def texts(data: bytes) -> list[str]:
    return normalise_chunk(data).texts


def test_plain_lines_pass_through_unchanged() -> None:
    data = b"INFO step 1 loss=0.5 (ok) [x]\nsecond line\n"
    assert texts(data) == ["INFO step 1 loss=0.5 (ok) [x]", "second line"]


def test_one_output_line_per_input_line_including_empty_ones() -> None:
    data = b"a\n\nb\n\n"
    assert texts(data) == ["a", "", "b", ""]


def test_chunk_without_trailing_newline_still_counts_last_line() -> None:
    assert texts(b"a\nb") == ["a", "b"]


def test_ansi_colours_are_removed_including_a_bare_code_that_lost_its_escape() -> None:
    data = b"\x1b[31mERROR\x1b[0m boom\n[36m(pid=1)[0m hello\n\x1b[1;33mwarn\x1b[m\n"
    batch = normalise_chunk(data)
    assert batch.texts == ["ERROR boom", "hello", "warn"]
    assert batch.line(1).prefix == "(pid=1)"


def test_bracketed_text_that_only_looks_like_colour_is_kept() -> None:
    assert texts(b"eta [12m] left\n") == ["eta [12m] left"]


def test_ray_prefixes_are_stripped_and_kept_as_a_field() -> None:
    data = (
        b"(Worker pid=1234, ip=10.0.0.7) RuntimeError: boom\n"
        b"(DTensorPolicyWorker[rank=0] pid=99) torch.OutOfMemoryError: CUDA out of memory\n"
        b"(VLLMEngine pid=5) (APIServer pid=6) EngineDeadError\n"
        b"(raylet, ip=10.0.0.8) [2026-01-01] worker died\n"
        b"[rank7]: Traceback (most recent call last):\n"
    )
    lines = [line for _, line in normalise_chunk(data)]
    assert [x.text for x in lines] == [
        "RuntimeError: boom",
        "torch.OutOfMemoryError: CUDA out of memory",
        "EngineDeadError",
        "[2026-01-01] worker died",
        "Traceback (most recent call last):",
    ]
    assert lines[0].prefix == "(Worker pid=1234, ip=10.0.0.7)"
    assert lines[1].prefix == "(DTensorPolicyWorker[rank=0] pid=99)"
    assert lines[2].prefix == "(VLLMEngine pid=5) (APIServer pid=6)"
    assert lines[4].prefix == "[rank7]:"


def test_a_parenthesis_that_is_not_a_ray_prefix_stays() -> None:
    assert texts(b"(note) something\n(a) pid is 3\n") == ["(note) something", "(a) pid is 3"]


def test_empty_prefixed_lines_between_bars_become_empty_text() -> None:
    batch = normalise_chunk(b"(Worker pid=1) \n")
    assert batch.texts == [""]
    assert batch.line(0).prefix == "(Worker pid=1)"


def test_ray_repeat_suffix_becomes_a_count() -> None:
    batch = normalise_chunk(b"(Worker pid=1, ip=1.2.3.4) NCCL WARN timeout [repeated 15x across cluster]\n")
    line = batch.line(0)
    assert line.text == "NCCL WARN timeout"
    assert line.repeated == 15


def test_tqdm_redraws_keep_only_the_newest_bar() -> None:
    data = (
        b"Collecting rollouts:   1%|          | 20/2048 [00:05<08:00, 4.1it/s]"
        b"\rCollecting rollouts:  21%|##        | 428/2048 [02:01<05:42, 4.73it/s]\n"
    )
    assert texts(data) == ["Collecting rollouts:  21%|##        | 428/2048 [02:01<05:42, 4.73it/s]"]


def test_error_spliced_into_a_bar_survives_the_redraw() -> None:
    spliced = (
        "Collecting rollouts:   5%|5         | 100/2048 [00:10<03:00, ?it/s"
        "[E ProcessGroupNCCL.cpp:1 Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=5, OpType=BROADCAST) ran for 600000 milliseconds "
        "before timing out.11:15:08, 17.35s/it]"
    )
    last = "Collecting rollouts:   6%|6         | 120/2048 [00:11<03:00, 10.0it/s]"
    data = ("\r" + spliced + "\r" + last + "\n").encode()
    assert texts(data) == [spliced + SEGMENT_SEP + last]


def test_bar_running_into_slurmstepd_error_without_newline_is_kept_whole() -> None:
    data = b"x:  50%|#####     | 5/10 [00:05<00:05, 1.0it/s]"
    data += b"slurmstepd: error: *** JOB 7 ON n1 CANCELLED ***\n"
    (text,) = texts(data)
    assert "slurmstepd: error: *** JOB 7 ON n1 CANCELLED ***" in text


def test_windows_line_ending_is_not_an_empty_redraw() -> None:
    assert texts(b"hello\r\n") == ["hello"]


def test_trailing_padding_from_terminal_wrapping_is_trimmed() -> None:
    assert texts(b"TORCH_NCCL_      \npe=BROADCAST   \t\nlast  ") == ["TORCH_NCCL_", "pe=BROADCAST", "last"]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    (text,) = texts(b"bad \xff\xfe bytes \xc3\n")
    assert text.startswith("bad ") and "bytes" in text and "\ufffd" in text


def test_nul_bytes_left_by_a_crash_are_dropped() -> None:
    assert texts(b"\x00\x00\x00after crash\n") == ["after crash"]


def test_giant_line_is_capped_and_marked_with_dropped_bytes() -> None:
    batch = normalise_chunk(b"ok\n" + b"x" * 1000 + b"\nafter\n", max_chars=100)
    assert batch.texts[0] == "ok"
    assert batch.texts[1] == "x" * 100 + "…[truncated 900 bytes]"
    assert batch.truncated == {1: 900}
    assert batch.texts[2] == "after"


def test_first_line_numbers_follow_the_batch_start() -> None:
    batch = normalise_chunk(b"a\nb\n", first_line=41)
    assert [n for n, _ in batch] == [41, 42]


def test_split_prefix_of_unprefixed_text_is_empty() -> None:
    assert split_prefix("plain") == ("", "plain")


def test_bar_segments_are_recognised_in_their_variants() -> None:
    assert is_bar_segment("Collecting rollouts:  21%|##  | 428/2048 [02:01<05:42, 4.73it/s]")
    assert is_bar_segment("428it [00:01, 300.00it/s]")
    assert is_bar_segment("gen: 100%|██████████| 10/10 [00:12<00:00, 1.20s/it]")
    assert is_bar_segment("x:   0%|          | 0/10 [00:00<?, ?it/s]")
    assert not is_bar_segment("x: 5%|#| 1/10 [00:01<0?it/s[E ProcessGroupNCCL timing out.11:15:08, 1.3s/it]")
    assert not is_bar_segment("RuntimeError: CUDA error")


def test_collapse_cr_of_only_carriage_returns_is_empty() -> None:
    assert collapse_cr("\r\r") == ""


def test_normalise_line_handles_a_single_line() -> None:
    line = normalise_line(b"\x1b[36m(Worker pid=1)\x1b[0m hi [repeated 2x across cluster]\n")
    assert (line.text, line.prefix, line.repeated) == ("hi", "(Worker pid=1)", 2)


@given(st.binary(max_size=300))
def test_any_bytes_normalise_to_one_line_per_newline(data: bytes) -> None:
    batch = normalise_chunk(data + b"\n")
    assert len(batch.texts) == (data + b"\n").count(b"\n")
    assert all("\n" not in t for t in batch.texts)
