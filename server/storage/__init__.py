"""The data dir on disk: the op log (docs/OPLOG.md), this machine's claim on its shard, the op cache, and the
small state files beside the log.
"""
