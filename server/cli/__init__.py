"""The `hivenote` command line: parsing, the notebook commands, the server-side commands, sync, and the REST
client that reaches a running server.
"""
