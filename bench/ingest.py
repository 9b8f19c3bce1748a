"""Ingest benchmark: the default rules over a large realistic training log, against grep.

Generates (or reuses) a log of --mb megabytes under /tmp with the shapes of a
real GRPO run (tqdm bars with \\r redraws, Ray-prefixed INFO lines, NCCL INFO
chatter, warnings that mention memory, caught tracebacks, a few real failures),
feeds it through `scan_text` in chunks, and runs `grep -E -c -f <the same
patterns>` over the same file in the same run.

Last line of output: a JSON object with mb_per_s, grep_mb_per_s, ratio_vs_grep.
Usage: .venv/bin/python bench/ingest.py [--mb 500] [--chunk-mb 8] [--regen]
"""

# ruff: noqa: E501
# (the embedded log shapes are as long as real ones)

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from supervisor.rules.engine import MatcherState, RuleSet, flush, load_ruleset, scan_text

RESULTS = Path(__file__).resolve().parent / "results" / "ingest.json"
BLOCK_BYTES = 1 << 20


def _bar(rng: random.Random, label: str, total: int) -> str:
    segs = []
    n = rng.randint(0, total // 2)
    for _ in range(rng.randint(3, 12)):
        n = min(total, n + rng.randint(1, 40))
        pct = 100 * n // total
        fill = "█" * (pct // 10) + " " * (10 - pct // 10)
        segs.append(f"{label}: {pct:3d}%|{fill}| {n}/{total} [02:01<05:42, {rng.uniform(1, 9):.2f}it/s]")
    return "\r".join(segs)


_TRACEBACK_CAUGHT = """Traceback (most recent call last):
  File "/opt/nemo_rl/utils/retry.py", line 41, in call_with_retry
    return fn()
  File "/opt/nemo_rl/data/loader.py", line 88, in fetch
    raise ValueError("sample too long")
ValueError: sample too long"""

_OOM = """Traceback (most recent call last):
  File "/opt/nemo_rl/examples/run_grpo_math.py", line 200, in <module>
    main()
ray.exceptions.RayTaskError(OutOfMemoryError): ray::DTensorPolicyWorker.train() (pid=2812, ip=10.0.0.12)
  File "/opt/nemo_rl/models/policy/dtensor_policy_worker.py", line 700, in train
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB"""


def _line(rng: random.Random, step: int) -> str:
    pid = rng.randint(1000, 99999)
    ip = f"10.0.{rng.randint(0, 3)}.{rng.randint(2, 250)}"
    r = rng.random()
    if r < 0.30:
        actor = rng.choice(["DTensorPolicyWorker[rank=0]", "VllmGenerationWorker", "RayWorkerWrapper"])
        return (
            f"\x1b[36m({actor} pid={pid}, ip={ip})\x1b[0m INFO 11-21 19:{rng.randint(10, 59)}:{rng.randint(10, 59)} "
            f"[metrics.py:{rng.randint(10, 400)}] step {step}: loss={rng.uniform(0, 1):.4f} "
            f"reward_mean={rng.uniform(0, 1):.4f} grad_norm={rng.uniform(0, 5):.3f} tokens/s={rng.randint(1000, 9000)}"
        )
    if r < 0.45:
        return _bar(
            rng, rng.choice(["Collecting rollouts", "Generating", "Training"]), rng.choice([512, 2048, 64])
        )
    if r < 0.58:
        host = f"node{rng.randint(1, 16)}"
        return rng.choice(
            [
                f"{host}:{pid}:{pid + 7} [{rng.randint(0, 7)}] NCCL INFO Channel {rng.randint(0, 31):02d}/0 : "
                f"{rng.randint(0, 7)}[{rng.randint(0, 7)}] -> {rng.randint(0, 7)}[{rng.randint(0, 7)}] via P2P/IPC",
                f"{host}:{pid}:{pid + 7} [0] NCCL INFO NET/IB : No device found.",
                f"{host}:{pid}:{pid + 7} [0] NCCL INFO Bootstrap : Using eth0:{ip}<0>",
                f"{host}:{pid}:{pid + 7} [{rng.randint(0, 7)}] NCCL INFO comm 0x{rng.getrandbits(40):x} rank "
                f"{rng.randint(0, 15)} nranks 16 cudaDev 0 nvmlDev 0 busId 18000 - Init COMPLETE",
            ]
        )
    if r < 0.66:
        return rng.choice(
            [
                f"(RayWorkerWrapper pid={pid}, ip={ip}) WARNING 11-21 19:20:01 [worker.py:211] To avoid "
                "out-of-memory errors, consider lowering gpu_memory_utilization",
                f"[rank{rng.randint(0, 7)}]:[W ProcessGroupNCCL.cpp:4561] Warning: "
                "TORCH_NCCL_AVOID_RECORD_STREAMS=1 has no effect for point-to-point collectives.",
                f"(VllmGenerationWorker pid={pid}) INFO 11-21 19:20:02 [gpu_worker.py:99] Memory profiling "
                f"takes {rng.uniform(1, 9):.2f} seconds; memory freed {rng.uniform(1, 9):.2f} GiB",
                "/opt/venv/lib/python3.12/site-packages/torch/utils/checkpoint.py:87: UserWarning: None of "
                "the inputs have requires_grad=True. Gradients will be None",
            ]
        )
    if r < 0.6605:
        return _TRACEBACK_CAUGHT
    if r < 0.66052:
        return _OOM
    words = rng.choice(["Loading", "Saving", "Logged", "Syncing", "Refit", "Timing"])
    return (
        f"{words} {rng.choice(['weights', 'batch', 'metrics', 'policy'])} in {rng.uniform(0, 30):.2f}s "
        f"(step {step}, micro_batch {rng.randint(0, 64)}) " + "x" * rng.randint(0, 60)
    )


def generate(path: Path, mb: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    blocks = []
    step = 0
    for _ in range(24):
        lines: list[str] = []
        size = 0
        while size < BLOCK_BYTES:
            step += rng.random() < 0.01
            ln = _line(rng, step)
            lines.append(ln)
            size += len(ln) + 1
        blocks.append(("\n".join(lines) + "\n").encode())
    target = mb * 1_000_000
    tmp = path.with_suffix(".part")
    written = 0
    with tmp.open("wb") as fh:
        while written < target:
            b = blocks[rng.randrange(len(blocks))]
            fh.write(b)
            written += len(b)
    tmp.replace(path)


def _grep_pattern(py: str) -> str:
    """Python regex -> POSIX ERE for GNU grep (same meaning for the constructs the rules use)."""
    out = []
    i = 0
    in_class = False
    while i < len(py):
        c = py[i]
        if c == "\\" and i + 1 < len(py):
            nx = py[i + 1]
            if nx == "d":
                out.append("0-9" if in_class else "[0-9]")
            elif nx == "S" and not in_class:
                out.append("[^[:space:]]")
            elif nx == "s":
                out.append("[:space:]" if in_class else "[[:space:]]")
            elif nx == "w" and in_class:
                out.append("[:alnum:]_")
            else:
                out.append(c + nx)
            i += 2
            continue
        if not in_class and py.startswith("(?:", i):
            out.append("(")
            i += 3
            continue
        if c == "[" and not in_class:
            in_class = True
        elif c == "]" and in_class and out and out[-1] != "[":
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


def run_engine(rs: RuleSet, path: Path, chunk_bytes: int, use_hyperscan: bool) -> tuple[float, float, int]:
    st = MatcherState(run_id="bench")
    matches = 0
    line_no = 1
    t0, c0 = time.perf_counter(), time.process_time()
    # Like the daemon's tailer: pread from the offset of the first unread line, hand over whole lines (one
    # copy of the bytes, no carried-over tail to concatenate).
    fd = os.open(path, os.O_RDONLY)
    try:
        offset = 0
        while True:
            data = os.pread(fd, chunk_bytes, offset)
            if not data:
                break
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                cut = len(data)  # a final line without newline (or one longer than a chunk)
            chunk = data if cut == len(data) else data[:cut]  # raw bytes: only candidate lines get decoded
            matches += len(scan_text(rs, st, chunk, "ray-driver.log", line_no, use_hyperscan=use_hyperscan))
            line_no += chunk.count(b"\n")
            offset += cut
            st.fired.clear()  # count every incident, as if each chunk were a new attempt
            st.incident = None
    finally:
        os.close(fd)
    matches += len(flush(rs, st))
    return time.perf_counter() - t0, time.process_time() - c0, matches


def run_grep(patterns: list[str], path: Path) -> tuple[float, float, int]:
    grep = shutil.which("grep")
    if grep is None:
        raise SystemExit("grep not found")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write("\n".join(_grep_pattern(p) for p in patterns) + "\n")
        pat_file = fh.name
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [grep, "-E", "-c", "-f", pat_file, str(path)], capture_output=True, text=True, check=False
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finally:
        os.unlink(pat_file)
    if proc.returncode > 1:
        raise SystemExit(f"grep failed: {proc.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, int(proc.stdout.strip() or 0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=500, help="log size in MB (default 500)")
    ap.add_argument("--chunk-mb", type=float, default=8.0, help="chunk size fed to scan_text")
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "shepherd-bench")
    ap.add_argument("--regen", action="store_true", help="regenerate the log even if one exists")
    ap.add_argument("--no-save", action="store_true", help=f"do not write {RESULTS}")
    ap.add_argument("--no-hyperscan", action="store_true", help="use the pure-Python bytes.find prefilter")
    args = ap.parse_args(argv)

    args.dir.mkdir(parents=True, exist_ok=True)
    path = args.dir / f"ingest-{args.mb}mb.log"
    if args.regen or not path.exists():
        t = time.perf_counter()
        generate(path, args.mb)
        print(f"generated {path} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    size_mb = path.stat().st_size / 1e6
    rs = load_ruleset()
    # Warm the page cache so neither side pays for the disk.
    with path.open("rb") as fh:
        while fh.read(1 << 24):
            pass
    g_wall, g_cpu, g_lines = run_grep(rs.patterns(), path)
    use_hs = rs.hyperscan_db() is not None and not args.no_hyperscan
    rs.hyperscan_regex_db()  # compiled once per rule set in the daemon too: not part of the ingest time
    e_wall, e_cpu, e_matches = run_engine(rs, path, int(args.chunk_mb * (1 << 20)), use_hs)
    res = {
        "size_mb": round(size_mb, 1),
        "chunk_mb": args.chunk_mb,
        "rules": len(rs.rules),
        "prefilter": ("hyperscan-regex" if rs.hyperscan_regex_db()[0] is not None else "hyperscan")
        if use_hs
        else "bytes.find",
        "mb_per_s": round(size_mb / e_wall, 1),
        "cpu_s_per_gb": round(e_cpu / size_mb * 1000, 2),
        "matches": e_matches,
        "grep_mb_per_s": round(size_mb / g_wall, 1),
        "grep_cpu_s_per_gb": round(g_cpu / size_mb * 1000, 2),
        "grep_matching_lines": g_lines,
        "ratio_vs_grep": round(g_wall / e_wall, 3),
    }
    print(f"{'':24}{'MB/s':>10}{'CPU s/GB':>10}{'hits':>10}")
    print(f"{'shepherd ' + res['prefilter']:24}{res['mb_per_s']:>10}{res['cpu_s_per_gb']:>10}{e_matches:>10}")
    print(f"{'grep -E -c -f':24}{res['grep_mb_per_s']:>10}{res['grep_cpu_s_per_gb']:>10}{g_lines:>10}")
    print(f"ratio vs grep: {res['ratio_vs_grep']}x (target >= 0.5x) over {res['size_mb']} MB")
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
