"""The one search module: ranking, filters, fusion, snippets, facets and the
response contract live here, and every surface (REST, MCP, staff UI) calls it.

Built in the search issue; the app is registered now so that its place in the
design is visible from the start.
"""
