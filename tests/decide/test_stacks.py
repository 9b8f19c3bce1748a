"""A hung job's stacks summarised: where most processes wait, which one is elsewhere and on which node
(offered as the node to exclude), from py-spy's JSON or from the trainer's faulthandler dump."""

from __future__ import annotations

from supervisor.decide.stacks import (
    Frame,
    ProcStacks,
    from_faulthandler,
    from_pyspy,
    process_name,
    render,
    summarise,
)

HUNG = (
    (
        "MainThread",
        (Frame("hang_forever", "/t/trainer/faults.py", 197), Frame("generate", "/t/rollout.py", 39)),
    ),
)
IDLE = (("MainThread", (Frame("main_loop", "/ray/_private/worker.py", 880),)),)
DRIVER = (
    (
        "MainThread",
        (Frame("get_objects", "/ray/_private/worker.py", 900), Frame("_rollouts", "/t/driver.py", 360)),
    ),
)


def proc(node: str, pid: int, name: str, threads: tuple[tuple[str, tuple[Frame, ...]], ...]) -> ProcStacks:
    return ProcStacks(node, pid, name, "py-spy", threads)


def test_most_ranks_wait_in_one_frame_and_the_one_elsewhere_is_the_straggler_with_its_node() -> None:
    procs = [
        proc("node1", 10, "driver", DRIVER),
        proc("node1", 11, "RolloutWorker", HUNG),
        proc("node1", 12, "RolloutWorker", HUNG),
        proc("node2", 21, "RolloutWorker", HUNG),
        proc("node2", 22, "RolloutWorker", IDLE),
    ]
    s = summarise(procs)
    assert s.group == "RolloutWorker" and s.group_size == 4
    assert s.waiting_place == "hang_forever (faults.py:197)" and s.waiting == 3
    assert s.stragglers == ("RolloutWorker pid 22 on node2: main_loop (worker.py:880)",)
    assert s.exclude_node == "node2"
    assert "3 of 4 RolloutWorker wait in hang_forever (faults.py:197)" in s.headline()
    assert "exclude_node node2 offered" in s.headline()
    assert "driver pid 10 on node1: get_objects (worker.py:900)" in s.text()


def test_no_straggler_without_a_clear_majority_and_no_node_offered_on_a_one_node_job() -> None:
    split = summarise([proc("n1", 1, "W", HUNG), proc("n1", 2, "W", IDLE)])
    assert split.stragglers == () and split.exclude_node is None
    one_node = summarise([proc("n1", i, "W", HUNG) for i in range(3)] + [proc("n1", 9, "W", IDLE)])
    assert one_node.stragglers and one_node.exclude_node is None  # excluding the only node helps nobody


def test_a_driver_alone_is_summarised_by_its_own_frame() -> None:
    s = summarise([proc("n1", 1, "driver", DRIVER)])
    assert s.group == "driver" and s.waiting_place == "get_objects (worker.py:900)"


def test_nodes_that_did_not_answer_and_processes_without_stacks_are_named() -> None:
    s = summarise([ProcStacks("n1", 5, "driver", "none", (), "py-spy: Permission denied")], ["n2"])
    assert s.processes == 0
    assert s.headline() == "no stacks captured (no answer from n2)"
    assert "driver pid 5 on n1: py-spy: Permission denied" in s.notes


def test_py_spy_json_puts_the_main_thread_first() -> None:
    data = [
        {
            "pid": 7,
            "os_thread_id": 8,
            "thread_name": "side",
            "frames": [{"name": "w", "filename": "a.py", "line": 1}],
        },
        {
            "pid": 7,
            "os_thread_id": 7,
            "thread_name": "MainThread",
            "frames": [{"name": "m", "filename": "b.py", "line": 2}],
        },
    ]
    threads = from_pyspy(data)
    assert [name for name, _ in threads] == ["MainThread", "side"]
    assert threads[0][1] == (Frame("m", "b.py", 2),)
    assert from_pyspy({"not": "a list"}) == ()


def test_a_faulthandler_dump_is_parsed_with_the_signalled_thread_first() -> None:
    text = (
        "Thread 0x00007f0000000002 (most recent call first):\n"
        '  File "/usr/lib/python3.11/threading.py", line 320 in wait\n'
        "\n"
        "Current thread 0x00007f0000000001 (most recent call first):\n"
        '  File "/t/trainer/faults.py", line 197 in hang_forever\n'
        '  File "/t/trainer/workers/rollout.py", line 39 in generate\n'
    )
    threads = from_faulthandler(text)
    assert threads[0] == (
        "current",
        (
            Frame("hang_forever", "/t/trainer/faults.py", 197),
            Frame("generate", "/t/trainer/workers/rollout.py", 39),
        ),
    )
    assert threads[1][1] == (Frame("wait", "/usr/lib/python3.11/threading.py", 320),)
    p = ProcStacks("n1", 3, "RolloutWorker", "faulthandler", threads)
    assert p.place == "hang_forever (faults.py:197)"
    assert "Thread current:\n    hang_forever (faults.py:197)" in render(p)


def test_ray_actor_titles_name_the_process() -> None:
    assert process_name(["ray::RolloutWorker.generate"]) == "RolloutWorker"
    assert process_name(["ray::IDLE"]) == "IDLE"
    assert process_name(["/venv/bin/python", "-m", "trainer"]) == "driver"


def test_between_groups_of_one_the_busy_one_is_summarised_not_the_idle_actor() -> None:
    idle_policy = (("MainThread", (Frame("Worker.main_loop", "/ray/_private/worker.py", 1069),)),)
    s = summarise([proc("n1", 1, "PolicyWorker", idle_policy), proc("n1", 2, "RolloutWorker", HUNG)])
    assert s.group == "RolloutWorker" and s.waiting_place == "hang_forever (faults.py:197)"
