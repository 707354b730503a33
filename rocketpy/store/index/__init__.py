"""Hash index of message keys (``store/index``): layout, mapped files, the dispatcher."""
