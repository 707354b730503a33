"""rocketpy.remoting.transport."""
