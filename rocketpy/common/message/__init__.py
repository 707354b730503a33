"""rocketpy.common.message: the message codec below client and broker (upstream's
``org.apache.rocketmq.common.message``): property names, the properties text, the batch send
body, the stored record, the offset message id and the client unique id. Pure: no I/O."""
