"""The smallest Ray driver for ray.sub: proves the job's Ray cluster answers and runs a task on each node.

Run inside a job started by supervisor/launch/ray.sub (it exports RAY_ADDRESS):
    sbatch supervisor/launch/ray.sub python examples/hello_ray.py
"""

from __future__ import annotations

import os
import socket
import sys

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=1)
def where() -> str:
    return f"{socket.gethostname()}@{ray.util.get_node_ip_address()}"


def main() -> int:
    ray.init(address=os.environ["RAY_ADDRESS"], log_to_driver=False)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    print(f"ray nodes alive: {len(nodes)}", flush=True)
    # One task pinned to each node: a worker that joined but cannot run tasks fails here, not later.
    refs = [
        where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
        for n in nodes
    ]
    for result in ray.get(refs, timeout=120):
        print(f"task ran on {result}", flush=True)
    ray.shutdown()
    print("HELLO-RAY-OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
