"""Recall benchmark: how many real failure-log excerpts (tests/data/failure-logs/) the rules recognise.

Every excerpt is replayed through the production path (watch/lines.py, then the engine) with the rules under
test (default: supervisor/rules/defaults/default.yaml); a failure counts when its labelled rule owns the
incident, a benign excerpt when no rule decides anything. As a baseline measured in the same run, the same
corpus is replayed against the rules file of another git revision (default: the corpus branch's base,
4df7c5c), so the table shows what the current rules gained.

Prints one line per class, the misses, and as its last line a JSON object with at least `recall` (over all
failure excerpts) and `benign_fired` (benign excerpts on which some rule decided). Results are saved to
bench/results/rules_recall.json.

`--held-out` also scores held-out set 8, tests/data/failure-logs-heldout-8/: real excerpts collected by
someone who wrote no pattern (sets 1 to 7, each scored once, now live in the corpus). It is scored once the
ninth round of issue 29's rules is done and never tuned to, so only its per-class counts are printed (no
file names of its misses: reading them is how a held-out set stops being one); the JSON's `held_out` names
the commit that last changed it.
Usage: .venv/bin/python bench/rules_recall.py [--rules FILE ...] [--baseline-rev REV | --no-baseline]
       [--held-out]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from supervisor.rules.engine import RuleSet, load_ruleset  # noqa: E402
from tests.support.corpus import BENIGN, HELD_OUT, Score, load, score  # noqa: E402

RESULTS = REPO / "bench" / "results" / "rules_recall.json"
BASELINE_REV = "4df7c5c"
DEFAULT_RULES_PATHS = ("supervisor/rules/defaults/default.yaml", "rules/default.yaml")  # now, before


def baseline_rules(rev: str) -> RuleSet | None:
    """The default rules as they were at `rev` (None when git cannot show them, or they no longer load)."""
    text = None
    for where in DEFAULT_RULES_PATHS:  # the file moved into the package; an older rev has it at the top
        try:
            text = subprocess.run(
                ["git", "-C", str(REPO), "show", f"{rev}:{where}"],
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout
            break
        except (OSError, subprocess.SubprocessError):
            continue
    if text is None:
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        fh.write(text)
    try:
        return load_ruleset([Path(fh.name)], use_default=False)
    except Exception as exc:  # an old rules file the current schema refuses: no baseline, say why
        print(f"baseline {rev}: its rules do not load with this schema ({exc})", file=sys.stderr)
        return None
    finally:
        Path(fh.name).unlink(missing_ok=True)


def held_out(rs: RuleSet) -> dict[str, object]:
    """Per-class counts on the held-out set, printed, and the commit that last changed the set."""
    commit = subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%h", "--", str(HELD_OUT.relative_to(REPO))],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout.strip()
    s = score(rs, load(HELD_OUT))
    print(f"held-out set 8 ({commit or 'uncommitted'}):")
    for label, (h, t) in s.per_class.items():
        print(f"  {label:22}{h:>6}{t:>7}  ({'quiet' if label == BENIGN else 'recall'})")
    hits, total = s.failures
    print(f"held-out: recall {hits}/{total} = {s.recall:.3f} (goal >= 0.90), benign fired {s.benign_fired}")
    return {
        "commit": commit or None,
        "recall": round(s.recall, 4),
        "benign_fired": s.benign_fired,
        "failure_hits": hits,
        "failures": total,
        "benign": s.per_class.get(BENIGN, (0, 0))[1],
        "per_class": {k: {"hits": h, "total": t} for k, (h, t) in s.per_class.items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rules", type=Path, nargs="*", default=[], help="extra rules files (after the default)")
    ap.add_argument("--no-default", action="store_true", help="only the --rules files")
    ap.add_argument("--baseline-rev", default=BASELINE_REV)
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument(
        "--held-out",
        action="store_true",
        help="also score held-out set 8, tests/data/failure-logs-heldout-8 (once; see above)",
    )
    args = ap.parse_args()

    excerpts = load()
    rs = load_ruleset(args.rules, use_default=not args.no_default)
    t0 = time.perf_counter()
    now = score(rs, excerpts)
    seconds = time.perf_counter() - t0
    base_rs = None if args.no_baseline else baseline_rules(args.baseline_rev)
    base: Score | None = score(base_rs, excerpts) if base_rs is not None else None

    print(f"{'class':22}{'hits':>6}{'total':>7}{'recall':>9}{'baseline':>10}")
    for label, (h, t) in now.per_class.items():
        b = base.per_class.get(label, (0, t)) if base else None
        what = "quiet" if label == BENIGN else "recall"
        shown = f"{h / t:.2f}" if t else "-"
        print(f"{label:22}{h:>6}{t:>7}{shown:>9}{(f'{b[0] / b[1]:.2f}' if b else '-'):>10}  ({what})")
    for ex, got in now.misses:
        why = f" [expected miss: {ex.expected_miss}]" if ex.expected_miss else ""
        print(f"miss: {ex.file}: got {got or 'no rule'}{why}")
    hits, total = now.failures
    res = {
        "recall": round(now.recall, 4),
        "benign_fired": now.benign_fired,
        "failure_hits": hits,
        "failures": total,
        "benign": now.per_class.get(BENIGN, (0, 0))[1],
        "per_class": {k: {"hits": h, "total": t} for k, (h, t) in now.per_class.items()},
        "misses": [ex.file for ex, _ in now.misses],
        "baseline_rev": None if base is None else args.baseline_rev,
        "baseline_recall": None if base is None else round(base.recall, 4),
        "baseline_benign_fired": None if base is None else base.benign_fired,
        "replay_seconds": round(seconds, 2),
    }
    line = f"recall {hits}/{total} = {now.recall:.3f} (goal >= 0.95), benign fired {now.benign_fired}"
    if base is not None:
        line += f"; baseline {args.baseline_rev}: {base.recall:.3f}, benign fired {base.benign_fired}"
    print(f"development corpus: {line}")
    if args.held_out:
        res["held_out"] = held_out(rs)
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
