"""The tools' JSON Schemas, derived from search.contract's models.

The contract declares every parameter once (names, types, enums, bounds,
help); this module only makes its JSON Schema cheap for a model to read,
because the whole tool list goes to the model with every conversation
(budget: 1,470 tokens for the five tools, TOOL_LIST_BUDGET in tests/test_mcp.py):

- inputs keep names, types, enums, bounds and defaults (but `false`, what a
  flag left out means, and those the help text names); no titles; `X | None`
  becomes `X` (leaving a parameter out is how a client says "none"); help
  text only where the name, enum or bounds do not already say it, and only
  the first time a parameter name appears in the tool list;
- outputs give each top-level field and its JSON type, with null where it
  may be null (not for a field left out rather than sent as null). The full
  response schema is `search.contract.json_schema()`.
"""

from typing import Any

from pydantic import BaseModel

from search.contract import without_null

# Parameters whose name, enum or bounds already say what their help says.
# include_facets and include_index: detail's help says what they default to.
SELF_EXPLANATORY = {
    "mode",
    "entities",
    "status",
    "severity",
    "limit",
    "include_scores",
    "include_content",
    "include_related",
    "include_facets",
    "include_index",
    "sort",
    "before",
    "after",
}


def input_schemas(models: dict[str, type[BaseModel]]) -> dict[str, dict[str, Any]]:
    """Each tool's input schema, in tool-list order (help is given once per parameter name)."""
    explained = set(SELF_EXPLANATORY)
    schemas = {}
    for name, model in models.items():
        schema = model.model_json_schema()
        properties = {}
        for field, spec in schema["properties"].items():
            spec = without_null(spec)
            spec.pop("title", None)
            if field in explained:
                spec.pop("description", None)
            if spec.get("default") is False or "(default" in spec.get("description", ""):
                spec.pop("default", None)
            explained.add(field)
            properties[field] = spec
        schemas[name] = {"type": "object", "properties": properties, "required": schema.get("required", [])}
    return schemas


def output_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    properties = {}
    for field, spec in schema["properties"].items():
        types = _json_type(spec, schema)
        if model.model_fields[field].exclude_if is not None and isinstance(types, list):  # left out, never null
            types = [t for t in types if t != "null"]
            types = types[0] if len(types) == 1 else types
        properties[field] = {"type": types}
    return {"type": "object", "properties": properties}


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
