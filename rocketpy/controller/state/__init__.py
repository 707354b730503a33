"""rocketpy.controller.state."""
