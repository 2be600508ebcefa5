from django.apps import AppConfig


class BacklogConfig(AppConfig):
    name = "backlog"
    verbose_name = "Backlog"
