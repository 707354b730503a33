"""rocketpy.cli."""
