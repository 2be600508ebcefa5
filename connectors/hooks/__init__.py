"""Webhooks: a tracker's push, taken in seconds; the schedule stays as the net.

`POST /hooks/github`, `/hooks/jira`, `/hooks/testrail` (connectors.views)
take the vendors' own deliveries. A delivery is received (intake: verified,
routed, bounded, stored, then answered) and processed after (processing:
through the sync's own writer, in order of truth). Each module says how.

TestIO has no webhooks; its sources are synced on schedule.
"""

from .intake import Refused, Taken, receive, too_large
from .processing import Connectors, process_next, process_pending, prune

__all__ = ["Connectors", "Refused", "Taken", "process_next", "process_pending", "prune", "receive", "too_large"]
