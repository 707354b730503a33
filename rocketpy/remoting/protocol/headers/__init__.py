"""rocketpy.remoting.protocol.headers."""
