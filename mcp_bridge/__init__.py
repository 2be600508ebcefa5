"""The MCP surface (`manage.py mcp`): a thin layer over `search/`."""
