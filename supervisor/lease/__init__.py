"""One active daemon per root, across login nodes: a lease in the shared root, taken over by a standby
when its holder stops renewing, and the fence that every action and store write checks."""

from supervisor.lease.keeper import Lease, NotLeader
from supervisor.lease.model import LeaseRecord

__all__ = ["Lease", "LeaseRecord", "NotLeader"]
