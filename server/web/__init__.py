"""The HTTP app: the guard in front of every route, the MCP mounts, REST under /api, the dashboard's pages, and
running it all with uvicorn.
"""
