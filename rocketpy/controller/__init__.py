"""rocketpy.controller."""
