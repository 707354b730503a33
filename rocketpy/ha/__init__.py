"""rocketpy.ha."""
