"""The trainer's side of the gRPC link: a server the Unity game calls.

ML-Agents' protocol makes the game the gRPC *client*: it calls
``/communicator_objects.UnityToExternalProto/Exchange`` with its output (a
UnityMessageProto) and blocks until the trainer replies with its next input. So each
trainer "exchange" is: reply to the game's pending call with our input, then wait for
the game's next call. The handler runs on a gRPC thread and hands messages over through
two queues; the handler is registered by hand (a generic handler with the method path of
ML-Agents' service), so no generated ``_pb2_grpc`` module is needed.

Anything that ends the link shows up as `UnityDisconnected` (message with header status
!= 200, a call cancelled because the client went away, the game process exiting) or
`UnityTimeout` (no call within the wait).
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent import futures
from typing import Callable, Optional

import grpc

from envs.unity import communicator_pb2 as pb

#: The method path of ML-Agents' service (package communicator_objects).
EXCHANGE_METHOD = "/communicator_objects.UnityToExternalProto/Exchange"
SERVICE_NAME = "communicator_objects.UnityToExternalProto"
#: Largest message accepted / sent (visual observations of many agents are big).
MAX_MESSAGE_BYTES = 512 * 1024 * 1024


class UnityDisconnected(Exception):
    """The game ended the link (quit message, dropped connection, process exit)."""


class UnityTimeout(Exception):
    """The game sent nothing within the wait."""


class _Disconnect:
    """Queue marker: the handler saw the client go away."""

    def __init__(self, why: str) -> None:
        self.why = why


class ExchangeServer:
    """A gRPC server on ``host:port`` holding at most one pending call from the game."""

    def __init__(self, port: int, host: str = "localhost") -> None:
        """
        Raises:
            OSError: the port cannot be bound (in use, or not allowed).
        """
        self.port = int(port)
        self._from_unity: "queue.Queue[object]" = queue.Queue()
        self._to_unity: "queue.Queue[Optional[pb.UnityMessageProto]]" = queue.Queue()
        self._closed = threading.Event()
        options = [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),  # a second trainer on the same port must fail, not share it
        ]
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=options)
        handler = grpc.method_handlers_generic_handler(
            SERVICE_NAME,
            {
                "Exchange": grpc.unary_unary_rpc_method_handler(
                    self._exchange,
                    request_deserializer=pb.UnityMessageProto.FromString,
                    response_serializer=pb.UnityMessageProto.SerializeToString,
                )
            },
        )
        self._server.add_generic_rpc_handlers((handler,))
        try:
            bound = self._server.add_insecure_port(f"{host}:{self.port}")
        except RuntimeError as e:  # grpc >= 1.5x raises instead of returning 0
            self._server.stop(0)
            raise OSError(f"cannot listen on {host}:{self.port} ({e})") from None
        if bound == 0:
            self._server.stop(0)
            raise OSError(f"cannot listen on {host}:{self.port} (in use?)")
        self._server.start()

    # ----------------------------------------------------------------- handler thread
    def _exchange(self, request: pb.UnityMessageProto, context: grpc.ServicerContext) -> pb.UnityMessageProto:
        if self._closed.is_set():
            return _quit_message()
        self._from_unity.put(request)
        while True:
            try:
                reply = self._to_unity.get(timeout=0.25)
            except queue.Empty:
                if self._closed.is_set():
                    return _quit_message()
                if not context.is_active():  # the game dropped the call (killed, crashed)
                    self._from_unity.put(_Disconnect("the Unity process closed the connection"))
                    return _quit_message()
                continue
            if reply is not None and not context.is_active():  # gone while we computed the reply
                self._from_unity.put(_Disconnect("the Unity process closed the connection"))
            return reply if reply is not None else _quit_message()

    # ----------------------------------------------------------------- trainer thread
    def receive(self, timeout: float, alive: Optional[Callable[[], Optional[str]]] = None) -> pb.UnityMessageProto:
        """The game's next message.

        Args:
            timeout: seconds to wait.
            alive: called about every 0.25 s while waiting; returns None while the game
                can still call, else why it cannot (e.g. "exited with code 1").

        Raises:
            UnityTimeout: nothing within ``timeout``.
            UnityDisconnected: the game quit or went away.
        """
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise UnityTimeout(f"nothing received within {timeout:g} s")
            try:
                item = self._from_unity.get(timeout=min(left, 0.25))
            except queue.Empty:
                why = alive() if alive is not None else None
                if why is not None:
                    raise UnityDisconnected(why) from None
                continue
            if isinstance(item, _Disconnect):
                raise UnityDisconnected(item.why)
            assert isinstance(item, pb.UnityMessageProto)
            if item.header.status != 200:
                detail = f": {item.header.message}" if item.header.message else ""
                raise UnityDisconnected(f"the Unity environment quit (status {item.header.status}{detail})")
            return item

    def reply(self, message: pb.UnityMessageProto) -> None:
        """Answer the game's pending call."""
        self._to_unity.put(message)

    def close(self) -> None:
        """Tell a pending call to quit (status 400), then stop the server. Idempotent."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._to_unity.put(None)
        # A short grace so the quit reply reaches the game before the listener goes.
        self._server.stop(grace=0.5).wait(2.0)


def _quit_message() -> pb.UnityMessageProto:
    message = pb.UnityMessageProto()
    message.header.status = 400
    return message
