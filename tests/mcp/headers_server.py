#!/usr/bin/env python3
"""A streamable-HTTP MCP server on the official Python SDK (`mcp`, which
PyPI's mcp-server-time brings) that tells what HTTP headers reached it, so
tests can see the headers tandem sends.

    headers_server.py PORT

Listens on 127.0.0.1:PORT, endpoint /mcp. Tool: `header {name}`, the value
of the request's header `name`, or `<absent>`.
"""

import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("headers")


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of the HTTP header `name` of this call's request."""
    return (ctx.headers or {}).get(name.lower(), "<absent>")


server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
