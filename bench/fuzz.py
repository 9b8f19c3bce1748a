"""Fuzzing campaign: every parser of outside input and the rules engine, each input under a time budget.

A co-tenant who can write the queue, a rules file or a job's log files chooses every byte Shepherd reads.
This throws generated inputs at each parser (hypothesis: random text and bytes, structured JSON and YAML,
and "adversarial" strings built from each parser's own tokens repeated thousands of times, the shape that
finds super-linear regexes and parsers), plus a coverage-guided pass with atheris (libFuzzer) where it is
installed. Per input: a time budget (--budget-ms, default 100) and, for the whole campaign, a memory bound
(RLIMIT_AS in the child processes). An input that raises what its parser does not promise is a crash; one
over the budget is a hang; one that never returns is killed with its child and counted as a hang.

Findings are written to bench/results/fuzz-findings/ (target, kind, the input as repr); each one found so
far is a regression test (tests/test_hostile_inputs.py and the package tests named in docs/security.md).
The campaign is bounded (--seconds, default 45 s in all). Prints one line per target; the LAST line is a
JSON object with inputs, crashes, hangs, max_input_s (the slowest input's time) and per-target details;
results are saved in bench/results/fuzz.json.

Usage: .venv/bin/python bench/fuzz.py [--seconds 45] [--budget-ms 100] [--no-atheris] [--targets a,b]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "bench" / "results" / "fuzz.json"
FINDINGS = ROOT / "bench" / "results" / "fuzz-findings"
MEMORY_BOUND = 3 << 30  # bytes of address space for a fuzzing child (the daemon's imports take ~1 GiB)


# ---- the targets ------------------------------------------------------------------------------------------
# Each target takes one generated value and runs one parser on it the way the daemon does. It may raise
# only what the parser promises (the `expected` exceptions); anything else is a crash.


@dataclass
class Target:
    name: str
    run: Callable[[Any], object]
    strategy: Callable[[], Any]  # builds the hypothesis strategy (imported lazily in the child)
    expected: tuple[type[BaseException], ...] = ()
    from_bytes: Callable[[bytes], Any] = field(default=lambda b: b)  # atheris' bytes -> this target's input


MAX_INPUT_CHARS = 64 * 1024  # one log line's bound; the per-input budget is for inputs of a real size


def _tokens_strategy(tokens: list[str], *, max_repeat: int = 20_000) -> Any:
    """Adversarial strings: a prefix, one or two of the parser's own tokens repeated many times, a suffix
    (at most `MAX_INPUT_CHARS`): the shape that makes a backtracking regex or a quadratic parser explode."""
    from hypothesis import strategies as st

    tok = st.sampled_from(tokens)
    unit = st.lists(tok, min_size=1, max_size=3).map("".join)
    return st.builds(
        lambda pre, u, n, post: (pre + u * n)[: MAX_INPUT_CHARS - len(post)] + post,
        st.lists(tok, max_size=4).map("".join),
        unit,
        st.integers(min_value=1, max_value=max_repeat),
        st.lists(tok, max_size=4).map("".join),
    )


def _text_or(tokens: list[str], max_repeat: int = 20_000) -> Any:
    from hypothesis import strategies as st

    return st.one_of(st.text(max_size=2000), _tokens_strategy(tokens, max_repeat=max_repeat))


def _json_value() -> Any:
    from hypothesis import strategies as st

    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=50),
    )
    return st.recursive(
        scalars,
        lambda kids: st.one_of(
            st.lists(kids, max_size=6), st.dictionaries(st.text(max_size=20), kids, max_size=6)
        ),
        max_leaves=40,
    )


def _json_bytes(extra_tokens: list[str]) -> Any:
    """JSON documents (valid, truncated, deeply nested, huge numbers) as bytes."""
    from hypothesis import strategies as st

    valid = _json_value().map(lambda v: json.dumps(v).encode())
    deep = st.integers(min_value=1, max_value=100_000).map(lambda n: b"[" * n + b"]" * n)
    deep_obj = st.integers(min_value=1, max_value=40_000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n)
    torn = valid.flatmap(lambda b: st.integers(0, max(0, len(b))).map(lambda i: b[:i]))
    return st.one_of(
        valid,
        deep,
        deep_obj,
        torn,
        st.binary(max_size=500),
        _tokens_strategy(extra_tokens).map(lambda s: s.encode("utf-8", "surrogatepass")),
    )


def _yaml_text(tokens: list[str]) -> Any:
    from hypothesis import strategies as st

    def bomb(levels: int, width: int) -> str:
        lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
        for i in range(1, levels):
            lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
        lines.append(f"name: x\ncommand: *a{levels - 1}")
        return "\n".join(lines) + "\n"

    return st.one_of(
        st.text(max_size=2000),
        st.builds(bomb, st.integers(1, 12), st.integers(1, 12)),
        st.integers(1, 100_000).map(lambda n: "command: " + "[" * n + "]" * n),
        st.integers(1, 20_000).map(lambda n: "command: " + "- " * n + "x"),
        _tokens_strategy(tokens, max_repeat=5000),
    )


def _targets() -> dict[str, Target]:
    # Imported here: the parent only orchestrates; children (and their memory bound) do the work.
    from supervisor.decide.checkpoints import metric_value, read_training_info
    from supervisor.domain.boundedjson import InputRefused
    from supervisor.domain.spec import load_spec
    from supervisor.domain.yamlpos import YamlDocumentError
    from supervisor.notify.slack import commands
    from supervisor.notify.slack.handler import from_action, from_slash
    from supervisor.notify.slack.http_mode import _invocation
    from supervisor.redact import redact
    from supervisor.rules.engine import MatcherState, flush, load_ruleset, scan_text
    from supervisor.rules.loader import RulesError, load_rules_text
    from supervisor.rules.state import find_node, normalise_signature
    from supervisor.rules.stepd import stepd_state
    from supervisor.slurm.parse import parse_sacct, parse_sbatch_parsable, parse_squeue
    from supervisor.watch.lines import normalise_chunk
    from supervisor.watch.metrics import MetricsReader, parse_metrics_line
    from supervisor.watch.progress import parse_status, parse_tqdm, status_events
    from supervisor.watch.tailer import Tailer
    from supervisor.watch.tbevents import EventFileReader, decode_event, frame_record

    default_rules = load_ruleset()
    scratch = Path(tempfile.mkdtemp(prefix="shepherd-fuzz-"))

    log_tokens = [
        "Traceback (most recent call last):",
        "\n",
        '  File "x.py", line 1, in f\n',
        "[rank1]:",
        "(pid=1) ",
        "(Worker pid=1, ip=10.0.0.1) ",
        "\r",
        "\x1b[31m",
        "[36m",
        "CUDA out of memory",
        "NCCL WARN ",
        "RayTaskError(",
        "OutOfMemoryError",
        "*** JOB 1 ON node1 CANCELLED AT 2026 DUE TO ",
        " ",
        "a",
        "1",
        ":",
        "%|",
        "it/s]",
        " [",
        "[repeated 3x across cluster]",
        "During handling of the above exception, another exception occurred:\n",
        "\xff",
        "é",
    ]

    def rules_scan(text: str) -> object:
        st = MatcherState(run_id="fuzz")
        out = scan_text(default_rules, st, text, "ray-driver.log")
        return out + flush(default_rules, st)

    def rule_regex(pattern: str) -> object:
        doc = (
            "version: 1\nrules:\n  - name: r\n    trigger:\n      kind: log\n"
            f"      regex: {json.dumps(pattern)}\n    actions: [cancel]\n"
        )
        try:
            rf = load_rules_text(doc, "fuzz.yaml")
        except RulesError:
            return None
        from supervisor.rules.engine import compile_rules

        rs = compile_rules(rf.rules)
        st = MatcherState(run_id="fuzz")
        # the pattern's own text, repeated: the line most likely to make a backtracking engine explode
        # (one line: the matcher's unit is a line or a traceback, and the budget is per unit)
        probe = (pattern * (4000 // max(1, len(pattern)) + 1))[:4000].replace("\n", " ").replace("\r", " ")
        # without Hyperscan: its database is built once per rule set in the daemon, here once per input
        return scan_text(rs, st, f"{probe}\n{'a' * 4000}!\n", "log", use_hyperscan=False)

    def tailer(data: bytes) -> object:
        path = scratch / "tail.log"
        path.write_bytes(data)
        t = Tailer(flush_partial_after_s=0.0)
        res = t.read(path, None, flush=True)
        t.close()
        return res.n_lines

    def tb(data: bytes) -> object:
        path = scratch / "events.out.tfevents.1.host"
        path.write_bytes(data + frame_record(data))
        reader = EventFileReader(path, resync_after_s=0.0)
        n = 0
        while n < 64:
            before = reader.offset
            res = reader.read()
            n += 1
            if res.offset == before:
                break
        try:
            decode_event(data)
        except (ValueError, IndexError, struct.error) as exc:  # what EventFileReader catches per record
            return exc
        return reader.offset

    def metrics(data: bytes) -> object:
        parse_metrics_line(data)
        path = scratch / "metrics.jsonl"
        path.write_bytes(data + b"\n" + data)
        return MetricsReader(path, max_bytes=1 << 20).read().rows

    def status(data: bytes) -> object:
        s = parse_status(data)
        return status_events("r", 1, s, None, 0.0) if s is not None else None

    def training_info(data: bytes) -> object:
        path = scratch / "training_info.json"
        path.write_bytes(data)
        try:
            info = read_training_info(path)
        except InputRefused:
            return None
        return metric_value(info, "val:accuracy")

    def slack_http(data: bytes) -> object:
        _invocation(data, "application/json")
        return _invocation(data, "application/x-www-form-urlencoded")

    def slack_payload(value: Any) -> object:
        if not isinstance(value, dict):
            value = {"type": "block_actions", "actions": value, "message": {"blocks": value}}
        from_slash(value)
        return from_action(value)

    def slack_text(text: str) -> object:
        commands.parse_slash("/shepherd", text)
        commands.parse_slash("/resume", text)
        return commands.parse_action(commands.blocks.ACTION_RESUME_LATEST, text)

    def log_text(text: str) -> object:
        return (find_node(text, ""), stepd_state(text))

    def said(text: str) -> object:  # what leaves for Slack and the log: a signature, redacted evidence
        return (normalise_signature(text), redact(text))

    def sbatch(text: str) -> object:
        try:
            return parse_sbatch_parsable(text)
        except ValueError:
            return None

    from hypothesis import strategies as st

    slurm_tokens = [
        "|",
        "\n",
        "123",
        "RUNNING",
        "shepherd:run=a:attempt=1",
        "(null)",
        "1:0",
        "_[1-3]",
        "+0",
        " ",
    ]
    json_tokens = ['{"step": 1, ', '"a": ', "1e999", "NaN", "[", "{", '"', "\\u0000", "9" * 20, ","]
    spec_tokens = [
        "name: x\n",
        "command: [a]\n",
        "&a ",
        "*a ",
        "<<: ",
        "{",
        "[",
        "- ",
        "  ",
        "!!binary ",
        "? ",
    ]

    return {
        t.name: t
        for t in [
            Target(
                "yaml_spec",
                lambda text: load_spec(Path("spec.yaml"), text),
                lambda: _yaml_text(spec_tokens),
                (YamlDocumentError,),
                lambda b: b.decode("utf-8", "replace"),
            ),
            Target(
                "yaml_rules",
                lambda text: load_rules_text(text, "rules.yaml"),
                lambda: _yaml_text([*spec_tokens, "rules:\n", "  - name: r\n", "regex: "]),
                (RulesError,),
                lambda b: b.decode("utf-8", "replace"),
            ),
            Target(
                "rule_regex",
                rule_regex,
                lambda: _text_or(
                    ["(a|aa)+", "(x+x+)+y", "a*", "$", "(?i)", "\\1", "[", "(?=", "{1000}", "|"], 300
                ),
                (),
                lambda b: b.decode("utf-8", "replace")[:4000],
            ),
            Target(
                "rules_scan",
                rules_scan,
                lambda: _text_or(log_tokens, 8000),
                (),
                lambda b: b.decode("utf-8", "replace"),
            ),
            Target(
                "log_lines",
                lambda data: normalise_chunk(data),
                lambda: st.one_of(st.binary(max_size=4000), _tokens_strategy(log_tokens).map(str.encode)),
            ),
            Target(
                "tailer",
                tailer,
                lambda: st.one_of(st.binary(max_size=4000), _tokens_strategy(log_tokens).map(str.encode)),
            ),
            Target(
                "tqdm", parse_tqdm, lambda: _text_or([*log_tokens, "1.5k", "/", "?", "s/it]", "<"]), (), _dec
            ),
            Target(
                "said",
                said,
                lambda: _text_or([*log_tokens, "xoxb-1-2", "sk-", "Bearer ", "TOKEN="]),
                (),
                _dec,
            ),
            Target("log_text", log_text, lambda: _text_or([*log_tokens, "ip=", "node: ", "0x1f"]), (), _dec),
            Target("status_json", status, lambda: _json_bytes(json_tokens)),
            Target("metrics_jsonl", metrics, lambda: _json_bytes(json_tokens)),
            Target("training_info", training_info, lambda: _json_bytes(json_tokens), (OSError,)),
            Target(
                "tensorboard",
                tb,
                lambda: st.one_of(
                    st.binary(max_size=2000),
                    st.binary(max_size=64).map(frame_record),
                    st.binary(max_size=64).map(lambda b: frame_record(frame_record(b) + b)),
                ),
            ),
            Target("squeue", parse_squeue, lambda: _text_or(slurm_tokens), (), _dec),
            Target("sacct", parse_sacct, lambda: _text_or(slurm_tokens), (), _dec),
            Target("sbatch", sbatch, lambda: _text_or(slurm_tokens), (), _dec),
            Target("slack_http", slack_http, lambda: _json_bytes([*json_tokens, "payload=", "&", "%7B"])),
            Target(
                "slack_payload",
                slack_payload,
                lambda: st.one_of(
                    _json_value(),
                    st.fixed_dictionaries(
                        {"type": st.just("block_actions"), "actions": _json_value(), "message": _json_value()}
                    ),
                ),
                (),
                lambda b: _json_or_text(b),
            ),
            Target(
                "slack_text",
                slack_text,
                lambda: _text_or(["resume ", "silence ", "x" * 10, "1h", " "]),
                (),
                _dec,
            ),
        ]
    }


def _dec(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _json_or_text(b: bytes) -> Any:
    try:
        return json.loads(b)
    except (ValueError, RecursionError):
        return b.decode("utf-8", "replace")


# ---- running a campaign in a child --------------------------------------------------------------------
@dataclass
class Result:
    target: str
    engine: str
    inputs: int = 0
    crashes: int = 0
    hangs: int = 0
    max_input_s: float = 0.0
    findings: list[dict[str, str]] = field(default_factory=list)


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BOUND, MEMORY_BOUND))


def _record(res: Result, kind: str, value: Any, detail: str) -> None:
    if len(res.findings) < 5:
        text = repr(value)
        res.findings.append(
            {"kind": kind, "input": text[:2000] + ("..." if len(text) > 2000 else ""), "detail": detail}
        )


def _check(t: Target, res: Result, value: Any, budget_s: float, inflight: Path, retime: bool = True) -> None:
    """One input: run it, time it, classify the outcome. An input over the budget is run twice more and its
    fastest time kept: a first call that paid for a lazy import or a cache is not a slow input."""
    inflight.write_text(f"{t.name}\t{repr(value)[:100_000]}")
    t0 = time.perf_counter()
    try:
        t.run(value)
    except t.expected:
        pass
    except MemoryError:
        res.crashes += 1
        _record(res, "memory", value, f"over the {MEMORY_BOUND >> 20} MiB memory bound")
    except Exception as exc:
        res.crashes += 1
        _record(res, "crash", value, "".join(traceback.format_exception_only(exc)).strip()[-500:])
    dt = time.perf_counter() - t0
    if dt > budget_s and retime:
        for _ in range(2):
            t1 = time.perf_counter()
            try:
                t.run(value)
            except Exception:
                pass
            dt = min(dt, time.perf_counter() - t1)
    res.inputs += 1
    res.max_input_s = max(res.max_input_s, dt)
    if dt > budget_s:
        res.hangs += 1
        _record(res, "slow", value, f"{dt:.3f} s (budget {budget_s:.3f} s)")


def child_hypothesis(names: list[str], seconds: float, budget_s: float, inflight: Path, seed: int) -> None:
    """Each target in turn for its share of `seconds`; results appended to $SHEPHERD_FUZZ_OUT as JSON lines
    (one per finished target), so a child killed by a hang loses only the target it was on."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    targets = _targets()
    out = Path(os.environ["SHEPHERD_FUZZ_OUT"])

    def campaign(t: Target, res: Result, deadline: float) -> Callable[[], None]:
        @hseed(seed)
        @settings(
            max_examples=1_000_000,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(t.strategy())
        def one(value: Any) -> None:
            if time.monotonic() > deadline:
                raise _TimeUp
            _check(t, res, value, budget_s, inflight)

        return one  # type: ignore[no-any-return]

    for name in names:
        res = Result(name, "hypothesis")
        try:
            campaign(targets[name], res, time.monotonic() + seconds)()
        except _TimeUp:
            pass
        with out.open("a") as fh:
            fh.write(json.dumps(res.__dict__) + "\n")


class _TimeUp(Exception):
    pass


def child_atheris(names: list[str], seconds: float, budget_s: float, inflight: Path) -> None:
    """One libFuzzer process over all targets: the first byte of each input picks the target, the rest is
    the input (coverage guidance learns each parser's branches). libFuzzer exits the process at the end."""
    import atheris  # type: ignore[import-not-found]

    with atheris.instrument_imports(include=["supervisor"]):
        targets = _targets()
    chosen = [targets[n] for n in names]
    results = {t.name: Result(t.name, "atheris") for t in chosen}
    out = Path(os.environ["SHEPHERD_FUZZ_OUT"])
    last_write = [0.0]

    def one(data: bytes) -> None:
        if not data:
            return
        t = chosen[data[0] % len(chosen)]
        try:
            value = t.from_bytes(data[1:])
        except Exception:
            return
        _check(t, results[t.name], value, budget_s, inflight)
        now = time.monotonic()
        if now - last_write[0] > 0.5:
            last_write[0] = now
            out.write_text("".join(json.dumps(r.__dict__) + "\n" for r in results.values()))

    import atexit

    atexit.register(lambda: out.write_text("".join(json.dumps(r.__dict__) + "\n" for r in results.values())))
    atheris.Setup(
        [sys.argv[0], f"-max_total_time={max(1, int(seconds))}", "-timeout=10", "-rss_limit_mb=2560"],
        one,
    )
    atheris.Fuzz()


# ---- the parent ---------------------------------------------------------------------------------------
def run_children(
    engine: str, names: list[str], seconds_each: float, budget_ms: float, seed: int
) -> list[Result]:
    """Run `names` in children of `engine`; a child that dies or hangs is replaced for the targets left."""
    results: dict[str, Result] = {}
    todo = list(names)
    while todo:
        work = Path(tempfile.mkdtemp(prefix="shepherd-fuzz-run-"))
        inflight = work / "inflight.txt"
        out = work / "results.jsonl"
        env = dict(os.environ, SHEPHERD_FUZZ_OUT=str(out), PYTHONHASHSEED="0", PYTHONWARNINGS="ignore")
        total = seconds_each * (len(todo) if engine == "hypothesis" else 1)
        argv = [sys.executable, __file__, "--child", engine, "--targets", ",".join(todo)]
        argv += ["--seconds", str(seconds_each if engine == "hypothesis" else total)]
        argv += ["--budget-ms", str(budget_ms), "--inflight", str(inflight), "--seed", str(seed)]
        died = ""
        try:
            proc = subprocess.run(
                argv, env=env, capture_output=True, text=True, timeout=total + 90, preexec_fn=_limit_memory
            )
            if proc.returncode != 0 and (engine == "hypothesis" or "==ERROR" in proc.stderr + proc.stdout):
                died = "crash: " + (proc.stderr + proc.stdout)[-1500:]
        except subprocess.TimeoutExpired:
            died = "hang: never returned"
        for line in out.read_text().splitlines() if out.exists() else []:
            r = Result(**json.loads(line))
            results[r.target] = r
        todo = [n for n in todo if n not in results] if engine == "hypothesis" else []
        if died:
            victim = _inflight_target(inflight, todo or names)
            r = results.setdefault(victim, Result(victim, engine))
            kind = died.split(":", 1)[0]
            if kind == "hang":
                r.hangs += 1
                r.max_input_s = max(r.max_input_s, total)
            else:
                r.crashes += 1
            r.findings.append({"kind": kind, "input": _read(inflight), "detail": died[:1500]})
            todo = [n for n in todo if n != victim]
        shutil.rmtree(work, ignore_errors=True)
    return [results[n] for n in names if n in results]


def _inflight_target(inflight: Path, candidates: list[str]) -> str:
    text = _read(inflight)
    return text.split("\t", 1)[0] if "\t" in text else candidates[0]


def _read(p: Path) -> str:
    try:
        return p.read_text()[:2000]
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=45.0, help="the whole campaign's time (default 45)")
    ap.add_argument("--budget-ms", type=float, default=100.0, help="time budget per input (default 100 ms)")
    ap.add_argument("--targets", default="", help="comma-separated target names (default: all)")
    ap.add_argument("--no-atheris", action="store_true", help="hypothesis only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--child", choices=["hypothesis", "atheris"], help=argparse.SUPPRESS)
    ap.add_argument("--inflight", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    names = [n for n in args.targets.split(",") if n] or list(_TARGET_NAMES)
    if args.child == "atheris":
        child_atheris(names, args.seconds, args.budget_ms / 1000, args.inflight)
        return 0
    if args.child == "hypothesis":
        child_hypothesis(names, args.seconds, args.budget_ms / 1000, args.inflight, args.seed)
        return 0

    try:
        import atheris  # type: ignore[import-not-found]  # noqa: F401

        engines = ["hypothesis"] if args.no_atheris else ["hypothesis", "atheris"]
    except ImportError:
        engines = ["hypothesis"]
    # Each child pays a few seconds of imports; hypothesis gets 60% of the rest, atheris 40%.
    budget = max(4.0, args.seconds - 8.0 * len(engines))
    share = {"hypothesis": 0.6, "atheris": 0.4} if len(engines) == 2 else {"hypothesis": 1.0}
    t0 = time.perf_counter()
    results: list[Result] = []
    for engine in engines:
        per = budget * share[engine] / (len(names) if engine == "hypothesis" else 1)
        got = run_children(engine, names, max(0.5, per), args.budget_ms, args.seed)
        results += got
        for r in got:
            print(
                f"{engine:10} {r.target:16} inputs {r.inputs:7}  crashes {r.crashes}  hangs {r.hangs}  "
                f"slowest {r.max_input_s * 1000:8.1f} ms",
                flush=True,
            )
    findings = [dict(f, target=r.target, engine=r.engine) for r in results for f in r.findings]
    summary = {
        "inputs": sum(r.inputs for r in results),
        "crashes": sum(r.crashes for r in results),
        "hangs": sum(r.hangs for r in results),
        "max_input_s": round(max((r.max_input_s for r in results), default=0.0), 4),
        "budget_ms": args.budget_ms,
        "memory_bound_mib": MEMORY_BOUND >> 20,
        "engines": engines,
        "seconds": round(time.perf_counter() - t0, 1),
        "targets": {
            f"{r.engine}:{r.target}": {
                "inputs": r.inputs,
                "crashes": r.crashes,
                "hangs": r.hangs,
                "max_input_ms": round(r.max_input_s * 1000, 2),
            }
            for r in results
        },
    }
    if findings:
        FINDINGS.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        (FINDINGS / f"{stamp}.json").write_text(json.dumps(findings, indent=1) + "\n")
        for f in findings[:20]:
            head = f"FINDING {f['engine']}:{f['target']} {f['kind']}: {f['detail'][:300]}"
            print(f"{head}\n   input: {f['input'][:300]}")
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


_TARGET_NAMES = (
    "yaml_spec",
    "yaml_rules",
    "rule_regex",
    "rules_scan",
    "log_lines",
    "tailer",
    "tqdm",
    "log_text",
    "status_json",
    "metrics_jsonl",
    "training_info",
    "tensorboard",
    "squeue",
    "sacct",
    "sbatch",
    "said",
    "slack_http",
    "slack_payload",
    "slack_text",
)

if __name__ == "__main__":
    raise SystemExit(main())
