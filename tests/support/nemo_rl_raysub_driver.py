"""A tiny stand-in for NeMo RL's `run_grpo.py`, run as COMMAND by NeMo RL's own ray.sub on the dev cluster.

It joins the Ray cluster that ray.sub brought up (as NeMo RL's init_ray does), runs one task on a
`worker_units` resource (the custom resource ray.sub gives each node), prints NeMo RL-like step banners and
exits with the code asked for. Every line goes to ray.sub's `<jobid>-logs/ray-driver.log`, where
tests/integration/test_nemo_rl_raysub.py reads them back.

    python tests/support/nemo_rl_raysub_driver.py [--steps N] [--exit-code N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys

import ray


@ray.remote(num_cpus=0, resources={"worker_units": 1})
def where() -> str:
    return f"{socket.gethostname()}@{ray.util.get_node_ip_address()}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--exit-code", type=int, default=0)
    args = ap.parse_args()

    print(f"driver: python={sys.executable} ray={ray.__version__} ray_cli={shutil.which('ray')}", flush=True)
    prefix = "SHEPHERD_PYXIS_"  # what the pyxis stand-in recorded of this step's container options
    pyxis = {k.removeprefix(prefix): v for k, v in os.environ.items() if k.startswith(prefix)}
    print(f"driver: pyxis stand-in request {sorted(pyxis.items())} cwd={os.getcwd()}", flush=True)
    ray.init(address="auto", log_to_driver=False)
    units = ray.cluster_resources().get("worker_units", 0)
    alive = sum(1 for n in ray.nodes() if n.get("Alive"))
    print(f"driver: worker_units={units:g} nodes={alive}", flush=True)
    print(f"driver: task ran on {ray.get(where.remote(), timeout=120)}", flush=True)
    for step in range(1, args.steps + 1):
        print(f"========================= Step {step}/{args.steps} =========================", flush=True)
    ray.shutdown()
    print(f"driver ok, exiting {args.exit_code}", flush=True)
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main())
