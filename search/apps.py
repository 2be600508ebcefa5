from django.apps import AppConfig
from django.core import checks


class SearchConfig(AppConfig):
    name = "search"

    def ready(self):
        from backlog.signals import records_imported
        from search.indexing.health import forget_coverage
        from search.indexing.vectors import after_bulk_write
        from search.ranking import config

        checks.register(config.check)  # a bad SEARCH_RANKING stops a command at start, not the first search

        def refresh(sender, rows: int, **kwargs) -> None:
            after_bulk_write(rows)  # a large import leaves the index's statistics and GIN pending list stale
            forget_coverage()  # and records without vectors yet

        records_imported.connect(refresh, weak=False, dispatch_uid="search.after_bulk_write")
