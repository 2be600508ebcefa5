from django.apps import AppConfig


class ConfigConfig(AppConfig):
    """The project's wiring: the system checks of the database, and the cache table's migration."""

    name = "config"

    def ready(self):
        from . import checks  # noqa: F401 - registers them
