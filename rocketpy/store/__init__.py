"""rocketpy.store."""
