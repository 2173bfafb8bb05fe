"""MCP (Model Context Protocol) servers as tool sources: the operator's list and the process's sessions."""

from trainers.mcp.client import POOL, McpCallError, McpClientPool
from trainers.mcp.servers import McpServer, McpServerError, configured_servers, schema_hash, server_for

__all__ = [
    "POOL",
    "McpCallError",
    "McpClientPool",
    "McpServer",
    "McpServerError",
    "configured_servers",
    "schema_hash",
    "server_for",
]
