"""rocketpy.proxy.pb: the ``apache.rocketmq.v2`` contract (.proto) and protoc's Python modules."""
