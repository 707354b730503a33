"""rocketpy.remoting."""
