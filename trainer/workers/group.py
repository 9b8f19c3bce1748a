"""Worker groups: the same calls run on in-process objects or on Ray actors.

Why: the single-controller loop is written once; `cluster.ray=false` swaps actors for plain
objects so the loop, tests and exact-resume checks need no Ray.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import structlog

log = structlog.get_logger(__name__)


class LocalGroup:
    def __init__(self, workers: list[Any]) -> None:
        self.workers = workers

    def __len__(self) -> int:
        return len(self.workers)

    def call(self, method: str, *args: Any, per_worker: list[tuple[Any, ...]] | None = None) -> list[Any]:
        if per_worker is not None:
            return [getattr(w, method)(*a) for w, a in zip(self.workers, per_worker, strict=True)]
        return [getattr(w, method)(*args) for w in self.workers]

    def ref(self, idx: int, method: str, *args: Any) -> Any:
        """A value (in-process) that `call` accepts as an argument; Ray returns an ObjectRef instead."""
        return getattr(self.workers[idx], method)(*args)

    def imap_unordered(self, method: str, jobs: list[tuple[Any, ...]]) -> Iterator[tuple[int, Any]]:
        for i, job in enumerate(jobs):
            yield i, getattr(self.workers[i % len(self.workers)], method)(*job)

    def shutdown(self) -> None:
        for w in self.workers:
            w.shutdown()


class RayGroup:
    def __init__(self, actors: list[Any]) -> None:
        self.actors = actors

    def __len__(self) -> int:
        return len(self.actors)

    def call(self, method: str, *args: Any, per_worker: list[tuple[Any, ...]] | None = None) -> list[Any]:
        import ray

        if per_worker is not None:
            refs = [getattr(a, method).remote(*p) for a, p in zip(self.actors, per_worker, strict=True)]
        else:
            refs = [getattr(a, method).remote(*args) for a in self.actors]
        return list(ray.get(refs))

    def ref(self, idx: int, method: str, *args: Any) -> Any:
        return getattr(self.actors[idx], method).remote(*args)

    def imap_unordered(self, method: str, jobs: list[tuple[Any, ...]]) -> Iterator[tuple[int, Any]]:
        import ray

        refs = {
            getattr(self.actors[i % len(self.actors)], method).remote(*job): i for i, job in enumerate(jobs)
        }
        pending = list(refs)
        while pending:
            # a bounded wait keeps the driver responsive to SIGTERM while a rollout is slow or stuck
            done, pending = ray.wait(pending, num_returns=1, timeout=1.0)
            for r in done:
                yield refs[r], ray.get(r)

    def shutdown(self) -> None:
        import ray

        try:
            ray.get([a.shutdown.remote() for a in self.actors], timeout=30)
        except Exception as e:  # a dead actor must not mask the original error
            log.warning("worker shutdown failed", error=str(e))
        for a in self.actors:
            ray.kill(a)


class RayCluster:
    """Starts or joins Ray and reserves one placement group bundle per worker."""

    def __init__(self, cluster_cfg: Any, n_workers: int) -> None:
        import ray
        from ray.util.placement_group import placement_group

        self.cfg = cluster_cfg
        address = os.environ.get("RAY_ADDRESS")
        self.started_here = not address
        if address:
            log.info("joining ray cluster", address=address)
            ray.init(address=address, log_to_driver=True)
        else:
            log.info("starting local ray", num_cpus=cluster_cfg.num_cpus)
            # address="local": always a new instance. Without it ray.init() joins the newest cluster that
            # `ray start` left on this machine (another job's, on a shared node) and then refuses num_cpus.
            ray.init(
                address="local",
                num_cpus=cluster_cfg.num_cpus,
                include_dashboard=False,
                log_to_driver=True,
                configure_logging=False,
            )
        bundle: dict[str, float] = {"CPU": cluster_cfg.cpus_per_worker}
        total_gpus = cluster_cfg.num_nodes * cluster_cfg.gpus_per_node
        if total_gpus > 0:
            # one GPU per worker when there are enough; otherwise workers share (colocated policy + rollout)
            bundle["GPU"] = min(1.0, total_gpus / n_workers)
        self.bundle = bundle
        self.pg = placement_group([dict(bundle) for _ in range(n_workers)], strategy="PACK")
        ray.get(self.pg.ready(), timeout=300)
        self.next_bundle = 0

    def spawn(self, cls: type, kwargs_for_rank: Callable[[int], dict[str, Any]], n: int) -> RayGroup:
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        remote_cls = ray.remote(cls)
        actors = []
        for rank in range(n):
            strategy = PlacementGroupSchedulingStrategy(
                placement_group=self.pg, placement_group_bundle_index=self.next_bundle
            )
            self.next_bundle += 1
            actors.append(
                remote_cls.options(
                    num_cpus=self.bundle["CPU"],
                    num_gpus=self.bundle.get("GPU", 0),
                    scheduling_strategy=strategy,
                    max_concurrency=1,
                ).remote(**kwargs_for_rank(rank))
            )
        return RayGroup(actors)

    def shutdown(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        try:
            remove_placement_group(self.pg)
        finally:
            if self.started_here:
                ray.shutdown()
