"""DLedger 0.3.1.2's on-disk log for DLedger CommitLog mode (dledger-commitlog.md section 1).

``entry`` (pure codec: 48-byte entry header, blank tail, 32-byte index unit, record patching),
``file_list`` (``MmapFileList``), ``store`` (``DLedgerMmapFileStore``), ``recovery``,
``meta`` (``currterm`` and ``checkpoint``) and ``reader`` (committed records for the RocketMQ
layer). Store layer: imports nothing of ``rocketpy.dledger`` (the controller's Raft group and its
msgpack log) or the broker.
"""
