"""The 5.x timer store's files: timer log, timer wheel and ``config/timercheck``
(upstream ``org.apache.rocketmq.store.timer``)."""
