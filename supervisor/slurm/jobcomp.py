"""Lost-intent lookups without slurmdbd read Slurm's jobcomp file once, then only what was appended since.

`sacct -c` ignores `--name`, `-S` and `-E` (its jobcomp reader filters only by id and partition): asked for
one job name it prints every record of the ever-growing file, and each lookup re-read and re-parsed all of it.
No library reads jobcomp/filetxt, so this is our own small reader: it remembers how far it has read (and the
file's inode, for a rotation), keeps only records that carry one of our job names, and answers from those.
Used only when the jobcomp file is readable here (the dev cluster, a login node sharing the controller's
file system); otherwise the client falls back to `sacct -c`.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from supervisor.slurm.parse import JobObservation, parse_exit_code, parse_state

# A record is one line of `Key=Value` fields; only our own job names (shep-<run>-a<n>) are kept.
_OURS = re.compile(r"(?:^| )Name=shep-[A-Za-z0-9._-]+-a\d+ ")
_FIELD = re.compile(r"(?:^| )(JobId|Name|JobState|ExitCode|NodeList|StartTime)=(\S*)")
MAX_REMEMBERED = 50_000  # records of our own jobs kept (the newest): a bound on memory, not on correctness
READ_CHUNK = 4 << 20


@dataclass
class JobcompStats:
    """What the reader did, for tests and bench/scale.py."""

    lookups: int = 0
    bytes_read: int = 0
    records_kept: int = 0
    rereads: int = 0  # the file was replaced or truncated (rotation): read again from its start


class JobcompReader:
    """Incremental reader of one jobcomp/filetxt file (not thread-safe: one caller at a time)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stats = JobcompStats()
        self._inode: int | None = None
        self._offset = 0
        self._by_name: OrderedDict[str, JobObservation] = OrderedDict()

    def lookup(self, names: Iterable[str]) -> list[JobObservation]:
        """The newest record of each of `names` that has ended, reading only what is new since last time.
        Raises OSError when the file cannot be read."""
        self.stats.lookups += 1
        self._catch_up()
        return [obs for name in sorted(set(names)) if (obs := self._by_name.get(name)) is not None]

    def _catch_up(self) -> None:
        with open(self.path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if st.st_ino != self._inode or st.st_size < self._offset:
                if self._inode is not None:
                    self.stats.rereads += 1
                self._inode, self._offset = st.st_ino, 0
                self._by_name.clear()
            fh.seek(self._offset)
            tail = b""
            while chunk := fh.read(READ_CHUNK):
                self.stats.bytes_read += len(chunk)
                lines = (tail + chunk).split(b"\n")
                tail = lines.pop()  # a partial last line waits for its newline
                for raw in lines:
                    self._take(raw.decode(errors="replace"))
                self._offset += len(chunk)
            self._offset -= len(tail)

    def _take(self, line: str) -> None:
        if not _OURS.search(line):
            return
        fields = dict(_FIELD.findall(line))
        if not fields.get("JobId", "").isdigit() or "Name" not in fields:
            return
        code, sig = parse_exit_code(fields.get("ExitCode", ""))
        obs = JobObservation(
            job_id=fields["JobId"],
            name=fields["Name"],
            state=parse_state(fields.get("JobState", "")),
            nodes="" if fields.get("NodeList") in (None, "(null)", "None assigned") else fields["NodeList"],
            start_time="" if fields.get("StartTime") in (None, "Unknown", "None") else fields["StartTime"],
            exit_code=code,
            signal=sig,
            source="sacct",
            end_time="" if fields.get("EndTime") in (None, "Unknown", "None") else fields["EndTime"],
        )
        self._by_name[obs.name] = obs
        self._by_name.move_to_end(obs.name)
        while len(self._by_name) > MAX_REMEMBERED:
            self._by_name.popitem(last=False)
        self.stats.records_kept = len(self._by_name)
