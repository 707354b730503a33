"""rocketpy.dledger."""
