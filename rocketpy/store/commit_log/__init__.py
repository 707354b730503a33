"""The CommitLog: record codec (``record.py``), append, flush and recovery."""
