from django import forms

from .models import SavedSearch


class SavedSearchForm(forms.ModelForm):
    """Name and webhook; the search itself comes from the search page's URL and is not edited here."""

    webhook_url = forms.URLField(
        label="Webhook URL (optional)",
        required=False,
        max_length=2000,
        assume_scheme="https",  # a URL typed without a scheme
        help_text="New matches are POSTed here as JSON signed with this search's secret "
        "(docs/ui.md, “Saved searches”). http or https, at a public address.",
    )

    class Meta:
        model = SavedSearch
        fields = ["name", "webhook_url"]

    def validate_unique(self):
        # The owner is not a field of the form; check the name per owner anyway.
        super().validate_unique()
        taken = SavedSearch.objects.filter(owner=self.instance.owner, name=self.cleaned_data.get("name"))
        if taken.exclude(pk=self.instance.pk).exists():
            self.add_error("name", "You have a saved search with this name already; choose another.")
