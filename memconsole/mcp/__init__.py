"""The MCP face of memconsole: an MCP server at /mcp (Streamable HTTP) whose tools are memory operations."""
