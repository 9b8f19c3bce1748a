"""`shepherd checkpoints RUN`: the steps a run can resume from, so a person picks one that exists."""

from __future__ import annotations

import argparse
import json

from supervisor.act.checkpoints import run_checkpoints
from supervisor.cli.common import AddCommand, open_store, run_named, settings_of
from supervisor.domain.overrides import AttemptOverrides


def register(add: AddCommand) -> None:
    c = add("checkpoints", cmd_checkpoints, "list a run's kept checkpoints: step, metric, best and latest")
    c.add_argument("run")
    c.add_argument("--json", action="store_true")


def cmd_checkpoints(args: argparse.Namespace) -> int:
    store = open_store(settings_of(args))
    run = run_named(store, args.run)
    last = store.latest_attempt(run.id)
    lineage = AttemptOverrides.from_dict(last.overrides).checkpoint_dir if last else None
    rows = run_checkpoints(run.spec, lineage)
    ck = run.spec.checkpoint
    if args.json:
        print(
            json.dumps(
                {
                    "run": run.id,
                    "metric": ck.metric if ck else None,
                    "checkpoints": [
                        {"name": k.name, "step": k.step, "metric": k.metric, "dir": k.dir,
                         "best": k.best, "latest": k.latest}
                        for k in rows
                    ],
                },
                indent=2,
            )
        )  # fmt: skip
        return 0
    if ck is None:
        print(f"{run.id}: the spec names no checkpoint dir (checkpoint.dir), so shepherd keeps no list")
        return 0
    if not rows:
        print(f"{run.id}: no complete checkpoint yet in {ck.dir}")
        return 0
    metric = ck.metric or "metric"
    width = max(len(k.name) for k in rows)
    print(f"{'STEP':<{width}}  {metric.upper():>14}  {'':<11}  DIR")
    for k in rows:
        value = f"{k.metric:g}" if k.metric is not None else "-"
        marks = ", ".join(w for w, on in (("best", k.best), ("latest", k.latest)) if on)
        print(f"{k.name:<{width}}  {value:>14}  {marks:<11}  {k.dir}")
    print(f"resume one with: shepherd resume {run.id} step_N  (or latest, best)")
    return 0
