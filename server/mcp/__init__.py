"""The two MCP surfaces over one store: the notebook tools (/mcp) and the official memory server's nine tools
(/mcp/graph), plus the stdio bridge for clients that only speak stdio.
"""
