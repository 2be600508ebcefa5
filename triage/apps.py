from django.apps import AppConfig


class TriageConfig(AppConfig):
    name = "triage"
    verbose_name = "Test run triage"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import evaluation  # noqa: F401  (registers the decisions as labels for search_eval --from-links)
