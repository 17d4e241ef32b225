"""MCP servers and the supervisor that run inside the sandbox (read as files, seeded there)."""
