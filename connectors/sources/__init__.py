"""One module a source kind, each a `Connector` (connectors/base.py)."""

from importlib import import_module

KINDS = {"jira": "Jira", "github": "GitHub", "testrail": "TestRail", "testio": "TestIO"}


def connector_class(kind: str):
    if kind not in KINDS:
        raise ValueError(f"unknown source kind {kind!r}; use one of {', '.join(KINDS)}")
    return getattr(import_module(f"{__name__}.{kind}"), KINDS[kind])
