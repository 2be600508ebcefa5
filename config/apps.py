from django.apps import AppConfig


class ConfigConfig(AppConfig):
    """The project itself: the `serve` command and the system checks of the database."""

    name = "config"

    def ready(self):
        from . import checks  # noqa: F401 - registers them
