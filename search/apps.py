from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "search"

    def ready(self):
        from django.db.backends.signals import connection_created

        from .ranking import configure_connection

        connection_created.connect(configure_connection, dispatch_uid="search.configure_connection")
