"""rocketpy.remoting.protocol.bodies: JSON request/response bodies (codes.md section 5)."""
