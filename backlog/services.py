"""Where import and export lived before they were split by what they serve:
backlog.imports (a file in), backlog.keys (what is stored under a key, and
a file's keys and relations checked), backlog.exports (records out).

Only the names callers still import from here, until they import them
from those modules.
"""

from .exports import export_selected
from .imports import DATABASE_REFUSED, import_records, no_progress
from .interchange import KIND_ORDER
from .keys import stored_by_key

__all__ = ["DATABASE_REFUSED", "KIND_ORDER", "export_selected", "import_records", "no_progress", "stored_by_key"]
