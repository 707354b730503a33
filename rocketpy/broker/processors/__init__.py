"""Request processors of the broker, one request family per module (STYLE.md section 9)."""
