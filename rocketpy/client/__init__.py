"""rocketpy.client."""
