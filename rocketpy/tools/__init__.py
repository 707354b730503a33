"""rocketpy.tools."""
