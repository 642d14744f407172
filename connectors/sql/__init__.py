"""SQL connector: PostgreSQL and SQLite databases as schema resources, read-only query tools, named queries and prompts."""
