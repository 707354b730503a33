"""rocketpy.namesrv."""
