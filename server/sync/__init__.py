"""Moving shard bytes between machines. The fold turns whatever shards are in the log folder into state, so a
transport only has to put other nodes' bytes there (never this node's own shard, which only its writer appends
to) and report how it is doing:

- folder: the log folder itself is synced by another program (Syncthing, Dropbox, ...); nothing runs here.
- s3: this node's ops uploaded as immutable objects, the others' downloaded incrementally (`s3.py`).
- peer: pull from other Hivenote servers over `/sync` (`peer.py`, routes in `routes.py`).

`replica.Replicas` is the one writer of other nodes' shard files; `status.SyncStatus` collects each
transport's last success and failure for /api/status, the dashboard, the tray and `hivenote sync status`.
"""
