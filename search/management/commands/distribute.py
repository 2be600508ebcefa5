"""`manage.py distribute`: lay out a database that moved onto a Citus cluster.

`migrate` distributes the index itself when it runs on a Citus coordinator
(search/citus.py). A database migrated on one server and then restored
onto a coordinator (pg_dump, pg_restore, `CREATE EXTENSION citus` and the
workers added) has its migrations applied already: this command does what
migrate would have, once, and says what it did and how long it took.
Each step is a transaction of its own (search.citus.distribute says why):
writes to the index (an import, a sync) wait while the rows are copied
into the shards and while the HNSW index is built on them; reads go on.
"""

import time

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction

from search import citus


class Command(BaseCommand):
    help = "Distribute the search index by product on a Citus coordinator (docs/scaling.md, Run on Citus)."

    def handle(self, *args, **options):
        with connection.cursor() as cursor:
            if not citus.installed(cursor):
                raise CommandError(
                    "this database has no citus extension: on the coordinator, CREATE EXTENSION citus and add the "
                    "workers (SELECT citus_add_node(host, port)) first; on one server there is nothing to distribute"
                )
            cursor.execute("SELECT count(*) FROM search_document")
            rows = cursor.fetchone()[0]
        started = time.perf_counter()
        with connection.cursor() as cursor:
            layout = citus.distribute(cursor, step=transaction.atomic)
        seconds = time.perf_counter() - started
        self.stdout.write(f"Citus: {layout}")
        self.stdout.write(f"{rows:,} index rows distributed in {seconds:.1f} s")
