"""rocketpy.remoting.protocol."""
