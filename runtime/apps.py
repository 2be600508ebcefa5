from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    """What runs the project: the embedded PostgreSQL, the replica router and `manage.py serve`."""

    name = "runtime"
