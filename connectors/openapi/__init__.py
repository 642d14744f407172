"""OpenAPI connector: every operation of an OpenAPI 3.0/3.1 spec becomes an MCP tool."""
