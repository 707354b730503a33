"""One exception hierarchy for rocketpy (STYLE.md section 10).

Owns: every exception type raised across package boundaries. Must not: import anything but stdlib
and ``common.codes``. Remote failures map a :class:`~rocketpy.common.codes.ResponseCode` to a class
with a ``retriable`` flag, as aiokafka's ``for_code`` does: the one place that says whether a
request refused with a code may succeed when sent again (the producer retries exactly these).
"""

from __future__ import annotations

from typing import ClassVar

from rocketpy.common.codes import ResponseCode, response_code_name


class RocketPyError(Exception):
    """Base of every rocketpy error."""


class ConfigError(RocketPyError):
    """A configuration value is missing, malformed or contradicts another.

    Args:
        key: the upstream config key.
        value: the offending value as given (``None`` when missing).
        allowed: what would have been accepted.
    """

    def __init__(self, key: str, value: object, allowed: str) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(f"invalid config {key}={value!r}: {allowed}")


class CodecError(RocketPyError):
    """Bytes that do not decode: names the field and the offset where decoding stopped."""

    def __init__(self, message: str, *, field: str = "", offset: int = -1) -> None:
        self.field = field
        self.offset = offset
        where = []
        if field:
            where.append(f"field={field}")
        if offset >= 0:
            where.append(f"offset={offset}")
        super().__init__(f"{message} ({', '.join(where)})" if where else message)


class FrameTooLarge(CodecError):
    """A frame's declared length exceeds the configured limit."""


class MessageCodecError(CodecError):
    """A stored record, batch send body, properties text or message id that does not decode
    or encode (``rocketpy.common.message``)."""


class StoreError(RocketPyError):
    """The message store cannot do what was asked (disk, format, state)."""


class RemotingError(RocketPyError):
    """A remoting-level failure (connection, timeout, or an error response)."""


class ConnectionClosed(RemotingError):
    """The connection closed (or failed) before the response arrived."""


class ConnectFailed(ConnectionClosed):
    """The connection could not be made (refused, unreachable, timed out, or backing off after
    such a failure): nothing of the request was sent, so retrying it cannot duplicate it."""


class RequestTimeout(RemotingError):
    """No response within the request's deadline."""


class RemoteError(RemotingError):
    """The peer answered with a non-success response code.

    Attributes:
        code: the response code (an int; may be unknown to us).
        remark: the peer's remark, possibly empty.
    """

    retriable: ClassVar[bool] = False
    _by_code: ClassVar[dict[int, type[RemoteError]]] = {}

    def __init__(self, code: int, remark: str = "") -> None:
        self.code = code
        self.remark = remark
        super().__init__(f"{response_code_name(code)}({code}): {remark}")

    @staticmethod
    def for_code(code: int, remark: str = "") -> RemoteError:
        """Build the most specific error class registered for ``code``."""
        cls = RemoteError._by_code.get(code, RemoteError)
        return cls(code, remark)


def _register(code: ResponseCode, *, retriable: bool) -> type[RemoteError]:
    cls = type(
        "".join(part.title() for part in code.name.split("_")) + "Error",
        (RemoteError,),
        {"retriable": retriable, "__doc__": f"Response code {code.name} ({code.value})."},
    )
    RemoteError._by_code[code.value] = cls
    return cls


# Retriable: upstream DefaultMQProducer.retryResponseCodes (TOPIC_NOT_EXIST, SERVICE_NOT_AVAILABLE,
# SYSTEM_ERROR, SYSTEM_BUSY, NO_PERMISSION, NO_BUYER_ID, NOT_IN_CURRENT_UNIT) -- a refreshed route
# or another broker may take the request (a topic not yet on this broker, a broker whose writes
# were wiped before shutdown) -- plus GO_AWAY (the broker is shutting down) and
# CONTROLLER_NOT_LEADER (ask the new leader).
SystemError_ = _register(ResponseCode.SYSTEM_ERROR, retriable=True)
SystemBusyError = _register(ResponseCode.SYSTEM_BUSY, retriable=True)
RequestCodeNotSupportedError = _register(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, retriable=False)
TopicNotExistError = _register(ResponseCode.TOPIC_NOT_EXIST, retriable=True)
ServiceNotAvailableError = _register(ResponseCode.SERVICE_NOT_AVAILABLE, retriable=True)
NoPermissionError = _register(ResponseCode.NO_PERMISSION, retriable=True)
NoBuyerIdError = _register(ResponseCode.NO_BUYER_ID, retriable=True)
NotInCurrentUnitError = _register(ResponseCode.NOT_IN_CURRENT_UNIT, retriable=True)
QueryNotFoundError = _register(ResponseCode.QUERY_NOT_FOUND, retriable=False)
ControllerNotLeaderError = _register(ResponseCode.CONTROLLER_NOT_LEADER, retriable=True)
GoAwayError = _register(ResponseCode.GO_AWAY, retriable=True)


class ControllerError(RocketPyError):
    """A controller request was refused by validation: carries the controller response code."""

    def __init__(self, code: int, remark: str) -> None:
        self.code = code
        self.remark = remark
        super().__init__(f"{response_code_name(code)}({code}): {remark}")


class ClientError(RocketPyError):
    """A client-side failure that is not a single remote response (``MQClientException``): no
    route for a topic, every retry failed, a client used before ``start()``."""
