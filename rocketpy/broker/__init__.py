"""rocketpy.broker."""
