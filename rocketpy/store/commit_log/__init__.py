"""The CommitLog: record codec (``record.py``, ``properties.py``, ``batch_body.py``), append,
flush and recovery."""
