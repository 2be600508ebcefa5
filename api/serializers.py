"""Products, features, tests and bugs as REST resources, and the import report.

Relations are keys (`"product": "PRD-1"`), as in the interchange format.
The rules are the ones every other write path applies: field limits from
the models and backlog.interchange (text length, NUL characters, raw_data an
object), and the cross-kind checks of `Record.clean()` (a key unique across
all kinds, a feature or test of the record's own product).
"""

import copy

from django.core.exceptions import ValidationError as DjangoValidationError
from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticError
from rest_framework import serializers
from rest_framework.validators import UniqueValidator

from backlog import access, interchange
from backlog.models import DERIVED_FIELDS, Bug, Feature, Product, QATest
from backlog.text import no_nul, one_of

TEXT = {"max_length": interchange.MAX_TEXT_CHARS}
TIMES = ["created_at", "updated_at"]


class KeyRelatedField(serializers.SlugRelatedField):
    """A relation named by key, found among the records the requesting user may see."""

    def get_queryset(self):
        request = self.context.get("request")
        return access.visible(super().get_queryset(), getattr(request, "user", None))

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        try:
            no_nul(data)
        except ValueError as exc:  # refused before PostgreSQL refuses the lookup
            raise serializers.ValidationError(f"{exc}.") from None
        # A key names its record whatever its case, as every lookup reads it.
        found = self.get_queryset().filter(key__iexact=data).first()
        if found is None:
            self.fail("does_not_exist", slug_name=self.slug_field, value=data)
        return found


def relation(model, **options) -> KeyRelatedField:
    return KeyRelatedField(
        slug_field="key",
        queryset=model.objects.all(),
        error_messages={
            "does_not_exist": f"no {model.KIND} has the key {{value}}.",
            "invalid": f"give the {model.KIND}'s key as a string.",
        },
        **options,
    )


class ChoiceField(serializers.ChoiceField):
    """A refused choice names the ones there are (DRF's message does not)."""

    def __init__(self, choices, **kwargs):
        super().__init__(choices, **kwargs)
        self.error_messages["invalid_choice"] = f'"{{input}}" is not one of {one_of(self.choices)}.'


class RecordSerializer(serializers.ModelSerializer):
    serializer_choice_field = ChoiceField
    kind = serializers.SerializerMethodField(help_text="product, feature, test or bug")

    class Meta:
        # created_at may be given (the time the record was made upstream);
        # updated_at is the time of the last write, set by Record.save().
        read_only_fields = ["id", "updated_at"]

    def get_kind(self, record) -> str:
        return record.KIND

    def get_fields(self):
        fields = super().get_fields()
        # Not the model field's own unique check ("bug with this key already
        # exists" names a kind, and would even for a record the user may not
        # see): Record.clean() says it, across kinds and case aside.
        fields["key"].validators = [v for v in fields["key"].validators if not isinstance(v, UniqueValidator)]
        return fields

    def validate(self, attrs):
        record = copy.copy(self.instance) if self.instance else self.Meta.model()
        for name, value in attrs.items():
            setattr(record, name, value)
        try:
            record.clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from exc
        return attrs


class ProductSerializer(RecordSerializer):
    class Meta(RecordSerializer.Meta):
        model = Product
        fields = ["kind", "key", "id", "name", "description", *TIMES]
        extra_kwargs = {"description": TEXT}


class FeatureSerializer(RecordSerializer):
    product = relation(Product)

    class Meta(RecordSerializer.Meta):
        model = Feature
        fields = ["kind", "key", "id", "product", "name", "description", "acceptance_criteria", *TIMES]
        extra_kwargs = {"description": TEXT, "acceptance_criteria": TEXT}


class QATestSerializer(RecordSerializer):
    product = relation(Product)
    feature = relation(Feature, allow_null=True, required=False)
    steps = serializers.ListField(child=serializers.CharField(**TEXT), required=False, help_text="one string a step")

    class Meta(RecordSerializer.Meta):
        model = QATest
        fields = ["kind", "key", "id", "product", "feature", "title", "description", "steps", "status", *TIMES]
        extra_kwargs = {"description": TEXT}


class BugSerializer(RecordSerializer):
    product = relation(Product)
    feature = relation(Feature, allow_null=True, required=False)
    test = relation(QATest, allow_null=True, required=False)
    duplicate_of = relation(
        Bug,
        allow_null=True,
        required=False,
        help_text="the key of the earlier bug of the same product this one repeats; null: none",
    )
    raw_data = serializers.JSONField(
        required=False,
        help_text="the bug as the tracker sent it; actual_result, expected_result, steps and environment "
        "are derived from it by the database",
    )
    actual_result = serializers.CharField(read_only=True, allow_null=True)
    expected_result = serializers.CharField(read_only=True, allow_null=True)
    steps = serializers.CharField(read_only=True, allow_null=True, help_text="one step a line")
    environment = serializers.CharField(read_only=True, allow_null=True)

    class Meta(RecordSerializer.Meta):
        model = Bug
        fields = ["kind", "key", "id", "product", "feature", "test", "title", "description", "severity", "status"]
        fields += ["duplicate_of", "raw_data", *DERIVED_FIELDS, *TIMES]
        # Unknown severity is null, never "" (as in the interchange format).
        extra_kwargs = {"description": TEXT, "severity": {"allow_blank": False}}

    def validate_raw_data(self, value):
        try:
            return RAW_DATA.validate_python(value)
        except PydanticError as exc:
            error = exc.errors(include_url=False)[0]
            if error["type"] == "dict_type":
                raise serializers.ValidationError('must be a JSON object, like {"actual_result": "..."}.') from exc
            raise serializers.ValidationError(error["msg"].removeprefix("Value error, ") + ".") from exc

    def save(self, **kwargs):
        bug = super().save(**kwargs)
        # The derived fields are computed by the database on write.
        bug.refresh_from_db(fields=["actual_result", "expected_result", "steps", "environment"])
        return bug


RAW_DATA = TypeAdapter(interchange.RawData)


# -- import ------------------------------------------------------------------------------


class ImportOptions(serializers.Serializer):
    dry_run = serializers.BooleanField(default=False, help_text="validate and report what would change; write nothing")
    skip_invalid = serializers.BooleanField(
        default=False, help_text="write the valid records and report the invalid ones, instead of writing nothing"
    )


class ProblemSerializer(serializers.Serializer):
    line = serializers.IntegerField(allow_null=True, help_text="line number in the body; null: the whole import")
    key = serializers.CharField(allow_null=True, help_text="the record's key, when it could be read")
    message = serializers.CharField()


class ImportReportSerializer(serializers.Serializer):
    """backlog.imports.ImportReport as JSON: counts by kind, and every problem."""

    written = serializers.BooleanField(help_text="false for a dry run and when nothing could be written")
    created = serializers.DictField(child=serializers.IntegerField(), help_text="records created, by kind")
    updated = serializers.DictField(child=serializers.IntegerField(), help_text="records changed, by kind")
    unchanged = serializers.DictField(child=serializers.IntegerField(), help_text="records already as sent, by kind")
    problems = ProblemSerializer(many=True)
    summary = serializers.CharField(help_text="the counts in one sentence, as manage.py import_records prints them")
