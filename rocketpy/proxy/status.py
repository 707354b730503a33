"""Business outcomes of the gRPC RPCs: ``Status{code, message}`` and the remoting -> gRPC map.

Owns: :class:`ProxyError` (``GrpcProxyException``/``ProxyException``: a ``Code`` and a message,
raised by validation and the backend, turned into the response's ``status`` at one place in
``rocketpy/proxy/messaging.py``), :func:`status`, and :func:`code_for_remoting` (proxy.md section 2:
``ResponseBuilder.buildStatus`` of a ``MQBrokerException``; a remoting timeout is PROXY_TIMEOUT,
raised by the backend). Business errors never change the
gRPC status code (that stays OK). Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

from rocketpy.common.codes import ResponseCode
from rocketpy.proxy.pb import definition_pb2 as pb

Code = pb.Code


class ProxyError(Exception):
    """An RPC that ends with a non-OK ``status``.

    Args:
        code: the ``apache.rocketmq.v2.Code``.
        message: the status message the client sees.
    """

    def __init__(self, code: pb.Code, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{pb.Code.Name(code)}: {message}")


def status(code: pb.Code, message: str | None = None) -> pb.Status:
    """A ``Status``; the message defaults to the code's name, as upstream's ``buildStatus``."""
    return pb.Status(code=code, message=pb.Code.Name(code) if message is None else message)


#: Remoting response code -> gRPC code (``ResponseBuilder``); anything else is
#: INTERNAL_SERVER_ERROR.
_REMOTING_TO_GRPC: Final[dict[int, pb.Code]] = {
    ResponseCode.SUCCESS: pb.Code.OK,
    ResponseCode.SYSTEM_BUSY: pb.Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: pb.Code.TOPIC_NOT_FOUND,  # TopicRouteHelper.isTopicNotExistError
}


def code_for_remoting(code: int) -> pb.Code:
    """The gRPC code a broker's or NameServer's remoting ``code`` maps to."""
    return _REMOTING_TO_GRPC.get(code, pb.Code.INTERNAL_SERVER_ERROR)
