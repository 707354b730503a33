"""Transactional messages: half messages, END_TRANSACTION's commit/rollback, the check-back.

``util.py`` holds the pure message builders, ``service.py`` the store side (half and op queues,
the check scan), ``check_listener.py`` what a due half message triggers (CHECK_TRANSACTION_STATE
to a producer, or the discard), ``setup.py`` the wiring into one broker. Mirrors upstream's
``broker/transaction`` package.
"""
