"""Where import and export lived before they were split by what they serve:
backlog.imports (a file in), backlog.keys (what is stored under a key, and
a file's keys and relations checked), backlog.exports (records out).

Only the names bench/ still imports from here, until it imports them from
those modules.
"""

from .imports import import_records
from .interchange import KIND_ORDER

__all__ = ["KIND_ORDER", "import_records"]
