"""Which pytest-xdist worker this process is, and the dev-cluster resources that are its alone (folder, ports,
job ids, netns id), so workers that run side by side never share a slurmctld a test stops, a job id or a veth.

Worker gw0 (and a run without xdist) keeps every historical default, so it finds the cluster scripts/test
brought up; worker gwN shifts each default by N strides. Job ids stay distinct across workers on purpose:
cgroup paths (slurm_node1/uid_0/job_<id>) and a job's Ray temp dir (/tmp/ray_<id>) are per host, not per
cluster.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PORT_STRIDE = (
    3000  # a worker's ports: its cluster's P..P+2, private ones at P+10..P+100 and P+2000; below Ray's 20000
)
DB_PORT_STRIDE = 100
JOB_ID_STRIDE = 1_000_000
NET_ID_STRIDE = (
    8  # a worker's netns ids: +0 its cluster, +1 the other version's, +3 slurmdbd's, +5 the 2-node one
)


def index() -> int:
    """0 outside xdist and on gw0; N on gwN."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(name.removeprefix("gw") or 0)


# Scripts/dev-cluster's own defaults per version (its header); the worker's values are shifted from these.
DEFAULTS = {
    "22.05": {"port": 6817, "db_port": 3307, "first_job_id": 1, "net_id": 0, "dir": REPO / ".dev-cluster"},
    "24.11": {
        "port": 6827,
        "db_port": 3327,
        "first_job_id": 240000,
        "net_id": 24,
        "dir": REPO / ".dev-cluster-24.11",
    },
}


def base(version: str) -> dict[str, int]:
    d = DEFAULTS.get(version, DEFAULTS["22.05"])
    return {
        "port": int(os.environ.get("SHEPHERD_DEV_PORT") or d["port"]),
        "db_port": int(os.environ.get("SHEPHERD_DEV_DB_PORT") or d["db_port"]),
        "first_job_id": int(os.environ.get("SHEPHERD_DEV_FIRST_JOB_ID") or d["first_job_id"]),
        "net_id": int(os.environ.get("SHEPHERD_DEV_NET_ID") or d["net_id"]),
    }


def session_cluster_env(version: str, worker: int) -> dict[str, str]:
    """The SHEPHERD_DEV_* values of worker `worker`'s own session cluster (none for worker 0: the defaults,
    or whatever the caller set, are its)."""
    if worker == 0:
        return {}
    own = base(version)
    folder = os.environ.get("SHEPHERD_DEV_CLUSTER_DIR") or str(
        DEFAULTS.get(version, DEFAULTS["22.05"])["dir"]
    )
    return {
        "SHEPHERD_DEV_CLUSTER_DIR": f"{folder}-w{worker}",
        "SHEPHERD_DEV_PORT": str(own["port"] + PORT_STRIDE * worker),
        "SHEPHERD_DEV_DB_PORT": str(own["db_port"] + DB_PORT_STRIDE * worker),
        "SHEPHERD_DEV_FIRST_JOB_ID": str(own["first_job_id"] + JOB_ID_STRIDE * worker),
        "SHEPHERD_DEV_NET_ID": str(own["net_id"] + NET_ID_STRIDE * worker),
    }


def private_cluster_env(
    version: str, role: str, *, port_offset: int, first_job_id: int, net_id: int, db_port_offset: int = 0
) -> dict[str, str]:
    """Folder, ports, job ids and netns id of a private cluster (`role` names it) of this worker: offsets from
    the worker's session cluster (os.environ holds it: the integration conftest set it for this worker)."""
    own = base(version)
    port = own["port"] + port_offset
    return {
        "SHEPHERD_DEV_CLUSTER_DIR": f"/tmp/shepherd-test-{role}-{version}-{port}",
        "SHEPHERD_DEV_PORT": str(port),
        "SHEPHERD_DEV_DB_PORT": str(own["db_port"] + db_port_offset),
        "SHEPHERD_DEV_FIRST_JOB_ID": str(first_job_id + JOB_ID_STRIDE * index()),
        "SHEPHERD_DEV_NET_ID": str(net_id),
    }
