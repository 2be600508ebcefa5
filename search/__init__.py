"""The one search module: ranking, filters, fusion, snippets, facets and the
response contract live here, and every surface (REST, MCP, staff UI) calls it
through `search.service.call`. README's "search/, a file an idea" maps the files.
"""
