"""rocketpy.common."""
