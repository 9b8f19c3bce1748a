"""The TensorBoard reader on files written by the real SummaryWriter, read while they grow."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from supervisor.watch.tbevents import (
    EventFileReader,
    TensorBoardWatcher,
    crc32c,
    decode_event,
    find_event_files,
    frame_record,
    masked_crc32c,
    newest_exp_dir,
    split_records,
    to_metric_events,
)

torch_tb = pytest.importorskip("torch.utils.tensorboard", reason="needs torch's SummaryWriter")
event_pb2 = pytest.importorskip("tensorboard.compat.proto.event_pb2", reason="needs tensorboard protos")
summary_pb2 = pytest.importorskip("tensorboard.compat.proto.summary_pb2")


def only_event_file(d: Path) -> Path:
    (f,) = sorted(d.glob("events.out.tfevents.*"))
    return f


def test_crc32c_matches_the_published_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_scalars_from_a_real_summary_writer_including_new_style_tensors(tmp_path: Path) -> None:
    w = torch_tb.SummaryWriter(log_dir=str(tmp_path))
    for step in range(3):
        w.add_scalar("train/loss", 1.0 / (step + 1), step)
        w.add_scalar("train/reward", step * 0.25, step, new_style=True)
    w.close()
    res = EventFileReader(only_event_file(tmp_path), verify_data=True).read()
    assert res.problem == ""
    got = {(s.tag, s.step): s.value for s in res.scalars}
    assert got == {
        ("train/loss", 0): 1.0,
        ("train/loss", 1): 0.5,
        ("train/loss", 2): pytest.approx(1 / 3),
        ("train/reward", 0): 0.0,
        ("train/reward", 1): 0.25,
        ("train/reward", 2): 0.5,
    }
    assert all(s.wall_time > 1e9 for s in res.scalars)


def test_new_style_scalars_really_are_tensors_in_the_file(tmp_path: Path) -> None:
    w = torch_tb.SummaryWriter(log_dir=str(tmp_path))
    w.add_scalar("r", 0.5, 1, new_style=True)
    w.close()
    records, _, _ = split_records(only_event_file(tmp_path).read_bytes())
    protos = [event_pb2.Event.FromString(r) for r in records]
    values = [v for p in protos for v in p.summary.value]
    assert values and values[0].HasField("tensor")


def test_a_file_appended_while_being_read_yields_each_scalar_exactly_once(tmp_path: Path) -> None:
    w = torch_tb.SummaryWriter(log_dir=str(tmp_path))
    w.add_scalar("loss", 0.0, 0)
    w.flush()
    reader = EventFileReader(only_event_file(tmp_path))
    seen = [(s.step, s.value) for s in reader.read().scalars]
    for step in range(1, 6):
        w.add_scalar("loss", float(step), step)
        w.flush()
        seen += [(s.step, s.value) for s in reader.read().scalars]
    assert reader.read().scalars == []
    w.close()
    assert seen == [(i, float(i)) for i in range(6)]


def test_a_partial_record_at_eof_is_left_for_later_at_every_cut_point(tmp_path: Path) -> None:
    w = torch_tb.SummaryWriter(log_dir=str(tmp_path))
    for step in range(4):
        w.add_scalar("x", float(step), step)
    w.close()
    full = only_event_file(tmp_path).read_bytes()
    target = tmp_path / "growing"
    for cut in range(0, len(full), 7):
        target.write_bytes(full[:cut])
        reader = EventFileReader(target)
        first = reader.read()
        assert first.problem == ""
        with open(target, "ab") as fh:
            fh.write(full[cut:])
        second = reader.read()
        steps = [s.step for s in first.scalars] + [s.step for s in second.scalars]
        assert steps == [0, 1, 2, 3], cut
        assert reader.offset == len(full)


def test_restart_from_a_saved_offset_reads_only_new_records(tmp_path: Path) -> None:
    w = torch_tb.SummaryWriter(log_dir=str(tmp_path))
    w.add_scalar("x", 1.0, 1)
    w.flush()
    f = only_event_file(tmp_path)
    saved = EventFileReader(f).read().offset
    w.add_scalar("x", 2.0, 2)
    w.close()
    res = EventFileReader(f, offset=saved).read()
    assert [(s.step, s.value) for s in res.scalars] == [(2, 2.0)]


def test_corrupt_length_crc_stops_without_raising_and_is_reported(tmp_path: Path) -> None:
    good = frame_record(make_event(1, "a", 1.0))
    bad = bytearray(frame_record(make_event(2, "a", 2.0)))
    bad[8] ^= 0xFF
    f = tmp_path / "events.out.tfevents.1.host"
    f.write_bytes(good + bytes(bad))
    res = EventFileReader(f).read()
    assert [s.step for s in res.scalars] == [1]
    assert res.problem == "bad length crc"
    assert res.offset == len(good)


def test_corrupt_data_is_caught_only_when_verification_is_on(tmp_path: Path) -> None:
    rec = bytearray(frame_record(make_event(1, "a", 1.0)))
    rec[20] ^= 0x01
    f = tmp_path / "events.out.tfevents.1.host"
    f.write_bytes(bytes(rec))
    assert EventFileReader(f, verify_data=True).read().problem == "bad data crc"


def test_double_and_half_tensor_scalars_decode() -> None:
    from tensorboard.compat.proto import tensor_pb2, types_pb2

    ev = event_pb2.Event(wall_time=5.0, step=9)
    v = ev.summary.value.add(tag="d")
    v.tensor.CopyFrom(tensor_pb2.TensorProto(dtype=types_pb2.DT_DOUBLE, double_val=[2.5]))
    v = ev.summary.value.add(tag="c")
    v.tensor.CopyFrom(tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, tensor_content=struct.pack("<f", 1.5)))
    v = ev.summary.value.add(tag="h")
    v.tensor.CopyFrom(tensor_pb2.TensorProto(dtype=types_pb2.DT_HALF, half_val=[0x3C00]))
    v = ev.summary.value.add(tag="vector-is-not-a-scalar")
    v.tensor.CopyFrom(tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[1.0, 2.0]))
    v.tensor.tensor_shape.dim.add(size=2)
    decoded = decode_event(ev.SerializeToString())
    assert (decoded.step, decoded.wall_time) == (9, 5.0)
    assert decoded.scalars == [("d", 2.5), ("c", 1.5), ("h", 1.0)]


def test_purge_step_restart_is_reported(tmp_path: Path) -> None:
    w = torch_tb.SummaryWriter(log_dir=str(tmp_path), purge_step=10)
    w.add_scalar("x", 1.0, 10)
    w.close()
    res = EventFileReader(only_event_file(tmp_path)).read()
    assert res.restarted_at_step == 10


def make_event(step: int, tag: str, value: float) -> bytes:
    ev = event_pb2.Event(wall_time=1.0, step=step)
    ev.summary.value.add(tag=tag, simple_value=value)
    return bytes(ev.SerializeToString())


def test_masked_crc_matches_tensorboards_writer() -> None:
    from tensorboard.summary.writer.record_writer import masked_crc32c as tb_masked

    data = make_event(3, "t", 0.5)
    assert masked_crc32c(data) == tb_masked(data)


def test_event_files_are_found_in_the_newest_exp_dir(tmp_path: Path) -> None:
    for n in (1, 2, 10):
        (tmp_path / f"exp_{n:03d}" / "tensorboard").mkdir(parents=True)
    (tmp_path / "exp_notanumber").mkdir()
    assert newest_exp_dir(tmp_path) == tmp_path / "exp_010"
    tb = tmp_path / "exp_010" / "tensorboard"
    (tb / "events.out.tfevents.200.host.1.0").write_bytes(frame_record(make_event(2, "b", 2.0)))
    (tb / "events.out.tfevents.100.host.1.0").write_bytes(frame_record(make_event(1, "a", 1.0)))
    assert [p.name for p in find_event_files(tmp_path)] == [
        "events.out.tfevents.100.host.1.0",
        "events.out.tfevents.200.host.1.0",
    ]
    watcher = TensorBoardWatcher(tmp_path)
    assert [(s.tag, s.step) for s in watcher.read()] == [("a", 1), ("b", 2)]
    assert watcher.read() == []
    resumed = TensorBoardWatcher(tmp_path, offsets=watcher.offsets())
    assert resumed.read() == []
    events = to_metric_events("run1", 2, [s for s in TensorBoardWatcher(tmp_path).read()])
    assert (events[0].run_id, events[0].attempt, events[0].tag, events[0].step) == ("run1", 2, "a", 1)


def test_no_exp_dir_means_no_event_files(tmp_path: Path) -> None:
    assert find_event_files(tmp_path / "absent") == []


@settings(max_examples=200, deadline=None)
@given(
    tag=st.text(max_size=200),
    step=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    value=st.floats(width=32, allow_nan=False),
    wall=st.floats(allow_nan=False),
)
def test_decoder_agrees_with_protobuf(tag: str, step: int, value: float, wall: float) -> None:
    ev = event_pb2.Event(wall_time=wall, step=step)
    ev.summary.value.add(tag=tag, simple_value=value)
    decoded = decode_event(ev.SerializeToString())
    assert (decoded.wall_time, decoded.step, decoded.scalars) == (wall, step, [(tag, value)])


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_record_with_a_bad_data_crc_is_skipped_and_the_rest_read(tmp_path: Path) -> None:
    bad = bytearray(frame_record(make_event(2, "a", 2.0)))
    bad[20] ^= 0x01
    f = tmp_path / "events.out.tfevents.1.host"
    f.write_bytes(frame_record(make_event(1, "a", 1.0)) + bytes(bad) + frame_record(make_event(3, "a", 3.0)))
    res = EventFileReader(f, verify_data=True).read()
    assert [s.step for s in res.scalars] == [1, 3]
    assert res.problem == "bad data crc" and res.offset == f.stat().st_size


def test_a_bad_length_crc_is_waited_on_then_skipped_to_the_next_record(tmp_path: Path) -> None:
    good = frame_record(make_event(1, "a", 1.0))
    bad = bytearray(frame_record(make_event(2, "a", 2.0)))
    bad[8] ^= 0xFF
    f = tmp_path / "events.out.tfevents.1.host"
    f.write_bytes(good + bytes(bad) + frame_record(make_event(3, "a", 3.0)))
    clock = FakeClock()
    reader = EventFileReader(f, resync_after_s=30, clock=clock)
    assert [s.step for s in reader.read().scalars] == [1]
    clock.now = 10  # a writer mid-flush on NFS gets this long to fill the hole
    assert reader.read().scalars == [] and reader.offset == len(good)
    clock.now = 31
    assert [s.step for s in reader.read().scalars] == [3]
    assert reader.offset == f.stat().st_size


def test_a_hole_of_zeros_is_jumped_and_garbage_without_a_header_keeps_only_its_tail(tmp_path: Path) -> None:
    f = tmp_path / "events.out.tfevents.1.host"
    f.write_bytes(
        frame_record(make_event(1, "a", 1.0)) + b"\x00" * 5000 + frame_record(make_event(2, "a", 2.0))
    )
    res = EventFileReader(f, resync_after_s=0).read()
    assert [s.step for s in res.scalars] == [1, 2] and res.offset == f.stat().st_size
    g = tmp_path / "events.out.tfevents.2.host"
    g.write_bytes(b"\xff" * 100)
    reader = EventFileReader(g, resync_after_s=0)
    assert reader.read().scalars == [] and reader.offset == 100 - 11
    with open(g, "ab") as fh:
        fh.write(frame_record(make_event(4, "a", 4.0)))
    assert [s.step for s in reader.read().scalars] == [4]


def test_watcher_cursors_carry_the_inode_and_a_replaced_file_is_read_again(tmp_path: Path) -> None:
    tb = tmp_path / "exp_001" / "tensorboard"
    tb.mkdir(parents=True)
    f = tb / "events.out.tfevents.100.host.1.0"
    f.write_bytes(frame_record(make_event(1, "a", 1.0)))
    first = TensorBoardWatcher(tmp_path)
    assert [s.step for s in first.read()] == [1]
    saved = first.cursors()
    assert saved == {str(f): (f.stat().st_ino, f.stat().st_size)}
    with open(f, "ab") as fh:
        fh.write(frame_record(make_event(2, "a", 2.0)))
    assert [s.step for s in TensorBoardWatcher(tmp_path, load=saved.get).read()] == [2]
    other = tb / "replacement"
    other.write_bytes(frame_record(make_event(7, "b", 7.0)) + frame_record(make_event(8, "b", 8.0)))
    other.replace(f)  # same name, new inode, larger than the saved offset
    assert [s.step for s in TensorBoardWatcher(tmp_path, load=saved.get).read()] == [7, 8]


def test_watcher_lists_files_only_when_asked(tmp_path: Path) -> None:
    tb = tmp_path / "exp_001" / "tensorboard"
    tb.mkdir(parents=True)
    (tb / "events.out.tfevents.100.host.1.0").write_bytes(frame_record(make_event(1, "a", 1.0)))
    watcher = TensorBoardWatcher(tmp_path)
    assert [s.step for s in watcher.read(rescan=False)] == [1]  # the first read always lists
    (tb / "events.out.tfevents.200.host.1.0").write_bytes(frame_record(make_event(2, "a", 2.0)))
    assert watcher.read(rescan=False) == []
    assert [s.step for s in watcher.read()] == [2]


def test_skipped_and_waited_on_records_in_one_read_keep_their_file_offsets(tmp_path: Path) -> None:
    one, three = frame_record(make_event(1, "a", 1.0)), frame_record(make_event(3, "a", 3.0))
    bad_data = bytearray(frame_record(make_event(2, "a", 2.0)))
    bad_data[20] ^= 0x01
    bad_length = bytearray(frame_record(make_event(9, "a", 9.0)))
    bad_length[8] ^= 0xFF
    f = tmp_path / "events.out.tfevents.1.host"
    f.write_bytes(one + bad_data + bad_length + three)
    clock = FakeClock()
    reader = EventFileReader(f, verify_data=True, resync_after_s=30, clock=clock)
    assert [s.step for s in reader.read().scalars] == [1]
    assert reader.offset == len(one) + len(bad_data)  # waits at the bad length
    clock.now = 29
    assert reader.read().scalars == []
    clock.now = 30  # the same offset, seen 30 s ago: skipped now
    assert [s.step for s in reader.read().scalars] == [3]
