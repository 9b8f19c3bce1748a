"""Which linear-time engine answers the whole match: google-re2 or Hyperscan, on the default rules.

Rule regexes must run in a linear-time engine (issue 21). Two candidates were measured on the ingest
benchmark's log (bench/ingest.py generates it), in one run, against `grep -E` on the same patterns:

* re2-chunk: RE2 alone answers every rule over whole chunks (each rule regex searched through the chunk,
  `^`/`$` per line), with no prefilter;
* hyperscan-whole: Hyperscan answers the whole match: every rule regex in one Hyperscan database
  (HS_FLAG_MULTILINE, byte mode, match ends only: start-of-match reporting crashed on a fuzzed pattern),
  one pass per chunk. Hyperscan has no capture
  groups, so a rule's `signature_group` and the `exclude` check still need a second engine on the hit;
  and a rule that Hyperscan cannot compile (it supports fewer constructs than RE2) is counted;
* shepherd: what the matcher does: Hyperscan (whole regexes of the shipped rules, literals of the others)
  finds the candidate lines in one pass, RE2 decides on those only (the full `scan_text`, with tracebacks
  grouped, exclusions and evidence, reading the file like bench/ingest.py);
* grep: `grep -E -c -f` with the same patterns.

Last line JSON with each engine's MB/s and its ratio to grep; saved in bench/results/regex_engines.json.
Usage: .venv/bin/python bench/regex_engines.py [--mb 200] [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.ingest import generate, run_engine, run_grep
from supervisor.rules.engine import load_ruleset
from supervisor.rules.regex import compile_regex

RESULTS = Path(__file__).resolve().parent / "results" / "regex_engines.json"
CHUNK = 8 << 20


def chunks(path: Path) -> list[bytes]:
    out = []
    with path.open("rb") as fh:
        rest = b""
        while data := fh.read(CHUNK):
            data = rest + data
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            out.append(data[:cut])
    return out


def re2_chunk(patterns: list[str], parts: list[bytes]) -> tuple[float, int]:
    regexes = [compile_regex(p, multiline=True) for p in patterns]
    hits = 0
    t0 = time.perf_counter()
    for data in parts:
        for rx in regexes:
            pos, n = 0, len(data)
            while pos < n:  # one hit per line, as the matcher needs
                m = rx.search(data, pos)
                if m is None:
                    break
                hits += 1
                nl = data.find(b"\n", max(m.end(), m.start() + 1))
                pos = n if nl < 0 else nl + 1
    return time.perf_counter() - t0, hits


def hyperscan_whole(patterns: list[str], parts: list[bytes]) -> tuple[float, int, list[str]]:
    import hyperscan  # type: ignore[import-not-found,unused-ignore]

    ok: list[str] = []
    refused: list[str] = []
    flags = hyperscan.HS_FLAG_MULTILINE  # byte mode, match ends: what supervisor/rules/compiled.py uses
    for p in patterns:  # which patterns Hyperscan accepts at all
        db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        try:
            db.compile(expressions=[p.encode()], ids=[0], elements=1, flags=[flags])
            ok.append(p)
        except Exception as exc:
            refused.append(f"{p[:60]}: {exc}")
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(
        expressions=[p.encode() for p in ok],
        ids=list(range(len(ok))),
        elements=len(ok),
        flags=[flags] * len(ok),
    )
    hits = 0

    def on_match(_id: int, _frm: int, _to: int, _flags: int, _ctx: Any) -> None:
        nonlocal hits
        hits += 1

    t0 = time.perf_counter()
    for data in parts:
        db.scan(data, match_event_handler=on_match)
    return time.perf_counter() - t0, hits, refused


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "shepherd-bench")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    path = args.dir / f"ingest-{args.mb}mb.log"
    if not path.exists():
        generate(path, args.mb)
    size_mb = path.stat().st_size / 1e6
    rs = load_ruleset()
    patterns = rs.patterns()
    parts = chunks(path)  # in memory: the engines are measured, not the disk

    g_wall, _g_cpu, g_lines = run_grep(patterns, path)
    r_wall, r_hits = re2_chunk(patterns, parts)
    h_wall, h_hits, refused = hyperscan_whole(patterns, parts)
    rs.hyperscan_regex_db()  # compiled once per rule set, as in the daemon
    s_wall, _s_cpu, s_matches = run_engine(rs, path, CHUNK, True)
    res = {
        "size_mb": round(size_mb, 1),
        "patterns": len(patterns),
        "grep_mb_per_s": round(size_mb / g_wall, 1),
        "re2_chunk_mb_per_s": round(size_mb / r_wall, 1),
        "hyperscan_whole_mb_per_s": round(size_mb / h_wall, 1),
        "shepherd_mb_per_s": round(size_mb / s_wall, 1),
        "re2_chunk_ratio_vs_grep": round(g_wall / r_wall, 3),
        "hyperscan_whole_ratio_vs_grep": round(g_wall / h_wall, 3),
        "shepherd_ratio_vs_grep": round(g_wall / s_wall, 3),
        "grep_matching_lines": g_lines,
        "re2_chunk_hits": r_hits,
        "hyperscan_whole_hits": h_hits,
        "shepherd_matches": s_matches,
        "hyperscan_refused": refused,
    }
    for k in ("grep", "re2_chunk", "hyperscan_whole", "shepherd"):
        ratio = res.get(f"{k}_ratio_vs_grep", 1.0)
        print(f"{k:18}{res[f'{k}_mb_per_s']:>10} MB/s  {ratio:>6}x grep")
    for r in refused:
        print(f"hyperscan refused: {r}")
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
