from django.apps import AppConfig


class TriageConfig(AppConfig):
    name = "triage"
    verbose_name = "Test run triage"
    default_auto_field = "django.db.models.BigAutoField"
