"""rocketpy.proxy: the gRPC proxy for the 5.x clients (``apache.rocketmq.v2``)."""
