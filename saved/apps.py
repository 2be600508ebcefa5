from django.apps import AppConfig


class SavedConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "saved"
    verbose_name = "Saved searches"
