"""A DLedger 0.3.1.2 member for RocketMQ's DLedger CommitLog mode (dledger-commitlog.md sections 2
and 3): the JSON peer protocol, election, the entry pusher and the member that ties them to the
on-disk log of :mod:`rocketpy.store.dledger_log`."""
