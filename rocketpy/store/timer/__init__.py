"""The 5.x timer store's files: the timer log, the timer wheel and ``config/timercheck``.

Owns: their byte layouts (``record.py``, pure) and the classes that map, append, scan, flush and
close them. Mirrors upstream's ``org.apache.rocketmq.store.timer`` file classes. Must not: decide
when a message is due or talk to the message store (``rocketpy/broker/timer_store.py`` does).
"""
