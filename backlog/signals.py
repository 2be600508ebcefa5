"""What the records tell the layers above them.

`backlog` is the ground floor: it imports nothing from the apps built on it.
A layer above that must act on a write listens here instead (search
refreshes its index statistics after a large import: search/apps.py).
"""

from django.dispatch import Signal

# Sent after an import wrote records, with `rows`: how many records it created or changed.
records_imported = Signal()
