"""JSON bodies of remoting requests and responses (upstream ``remoting/protocol/body``)."""
