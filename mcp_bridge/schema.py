"""The tools' JSON Schemas, derived from search.contract's models.

The contract declares every parameter once (names, types, enums, bounds,
help); this module only makes its JSON Schema cheap for a model to read,
because the whole tool list goes to the model with every conversation
(budget: 1,200 tokens for the six tools, TOOL_LIST_BUDGET in tests/test_mcp.py):

- inputs list the parameters an agent needs (UNLISTED: those it reaches
  another way, still accepted as sent, as REST takes them) with names,
  types, enums, bounds and defaults (but `false`, what a flag left out
  means, and those the help text names); no titles; `X | None` becomes `X`
  (leaving a parameter out is how a client says "none"); help text only
  where the name, enum or bounds do not already say it, and a help text only
  the first time it appears in the tool list;
- outputs give the fields every answer has and their JSON types (an answer
  may hold more: the full response schema is `search.contract.json_schema()`).
"""

from typing import Any

from pydantic import BaseModel

from search.contract import without_null

# Parameters whose name, enum or bounds already say what their help says.
# detail: each tool's description says what its concise answer holds.
SELF_EXPLANATORY = {"mode", "entities", "limit", "sort", "before", "after", "detail"}

# Accepted, not listed: an agent says the same through what is listed. Search's filters are
# the query's fields (kind:bug status:open severity:high product:KEY feature:KEY created:>...,
# docs/search-syntax.md, which the query's help names); the include_ switches are detail's
# (and get's fields'); match_mode=raw (a tsquery) is for people who write them; correct=false is
# what corrected_query's help offers.
QUERY_FIELDS = {
    "entities",
    "products",
    "status",
    "severity",
    "feature",
    "created_after",
    "created_before",
    "updated_after",
    "updated_before",
}
SWITCHES = {
    "match_mode",
    "correct",
    "include_scores",
    "include_content",
    "include_facets",
    "include_index",
    "include_related",
}
# mode: hybrid serves similar and check_duplicates best (docs/duplicates.md); search lists it.
# draft_feature: the staff UI's (a bug page, the report form); an agent narrows by feature.
UNLISTED = {"search": QUERY_FIELDS | SWITCHES, "default": SWITCHES | {"mode", "draft_feature"}}


def input_schemas(
    models: dict[str, type[BaseModel]], defaults: dict[str, dict[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """Each tool's input schema, in tool-list order (a help text is given once). `defaults`:
    a tool's own defaults where they are not the contract's (tool -> parameter -> value)."""
    explained = set()
    schemas = {}
    for name, model in models.items():
        schema = model.model_json_schema()
        unlisted = UNLISTED.get(name, UNLISTED["default"])
        own = (defaults or {}).get(name, {})
        properties = {}
        for field, spec in schema["properties"].items():
            if field in unlisted:
                continue
            spec = without_null(spec)
            spec.pop("title", None)
            if field in own:
                spec["default"] = own[field]
            help_text = spec.get("description")
            if field in SELF_EXPLANATORY or (field, help_text) in explained:
                spec.pop("description", None)
            if spec.get("default") is False or "(default" in spec.get("description", ""):
                spec.pop("default", None)
            explained.add((field, help_text))
            properties[field] = spec
        schemas[name] = {"type": "object", "properties": properties, "required": schema.get("required", [])}
    return schemas


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The fields every answer has, and their JSON types."""
    schema = model.model_json_schema()
    fields = schema.get("required", [])
    return {"type": "object", "properties": {f: {"type": _json_type(schema["properties"][f], schema)} for f in fields}}


def _json_type(spec: dict, schema: dict) -> str | list[str]:
    if "$ref" in spec:
        return _json_type(schema["$defs"][spec["$ref"].rsplit("/", 1)[-1]], schema)
    if "anyOf" in spec:
        types = []
        for option in spec["anyOf"]:
            found = _json_type(option, schema)
            types += found if isinstance(found, list) else [found]
        return list(dict.fromkeys(types))
    return spec.get("type", "object")
