"""The channel between the grader and a submission's process: framed messages, and the plain-data
codec of what a submission sends back.

A message is an 8-byte big-endian length, then that many bytes. Every reader in the grader, the
zygote and the worker goes through `recv`: one size limit (MAX_MESSAGE) checked before anything is
allocated, the body read into one preallocated buffer (linear time, whatever the chunk sizes), and
one deadline for the whole message, however slowly its bytes arrive.

What a submission sends back is plain data only (None, bool, int, float, str, tuples, dicts,
tensors as dtype, shape and bytes). `decode` reads it with an unpickler that refuses every class,
checks every value's exact type, and checks a tensor's byte count against its shape before it
allocates the tensor: an object of the learner's own class (an `int` subclass, say) or a tensor
that claims a terabyte makes that message an error, never the grader's.
"""
from __future__ import annotations

import io
import math
import pickle
import socket
import struct
import time
from typing import Any

import torch

HEADER = struct.Struct(">Q")
MAX_MESSAGE = 64 * 2**20  # bytes, in either direction


class FrameError(Exception):
    """The peer closed the channel, announced a message over MAX_MESSAGE, or stopped half-way
    through one."""


def send(sock: socket.socket, data: bytes) -> None:
    if len(data) > MAX_MESSAGE:
        raise FrameError(f"a message of {len(data):,} bytes, over the limit of {MAX_MESSAGE:,}")
    sock.sendall(HEADER.pack(len(data)) + data)


def recv(sock: socket.socket, timeout: float | None = None, patient: bool = False) -> bytes | None:
    """The next message, or None when none began within `timeout` seconds (None: wait for ever).
    A message that began must end by the same deadline. `patient`: a KeyboardInterrupt that lands
    while waiting is ignored (the worker: a late interrupt for a cell that had just finished)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    head = bytearray(HEADER.size)
    if not _fill(sock, memoryview(head), deadline, patient, begun=False):
        return None
    size = HEADER.unpack(head)[0]
    if size > MAX_MESSAGE:
        raise FrameError(f"a message of {size:,} bytes announced, over the limit of {MAX_MESSAGE:,}")
    body = bytearray(size)
    _fill(sock, memoryview(body), deadline, patient, begun=True)
    return bytes(body)


def send_fd(sock: socket.socket, number: int, fd: int) -> None:
    """One number and one open file descriptor (the zygote hands the grader a worker's socket)."""
    socket.send_fds(sock, [HEADER.pack(number)], [fd])


def recv_fd(sock: socket.socket, timeout: float | None = None) -> tuple[int, int]:
    sock.settimeout(timeout)
    msg, fds, _, _ = socket.recv_fds(sock, HEADER.size, 1)
    if len(msg) != HEADER.size or len(fds) != 1:
        raise FrameError("closed")
    return HEADER.unpack(msg)[0], fds[0]


def _fill(sock: socket.socket, view: memoryview, deadline: float | None, patient: bool, begun: bool) -> bool:
    got = 0
    while got < len(view):
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                if got == 0 and not begun:
                    return False
                raise FrameError("the message stopped half-way")
            sock.settimeout(left)
        else:
            sock.settimeout(None)
        try:
            n = sock.recv_into(view[got:])
        except TimeoutError:
            continue
        except KeyboardInterrupt:
            if patient:
                continue
            raise
        if n == 0:
            raise FrameError("closed")
        got += n
    return True


# ----------------------------------------------------------------------------------------------
# Plain data: what a submission's process may send
# ----------------------------------------------------------------------------------------------

_DTYPES = {str(d): d for d in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                               torch.float16, torch.bfloat16, torch.float32, torch.float64)}
_ITEMSIZE = {name: torch.empty((), dtype=d).element_size() for name, d in _DTYPES.items()}
MAX_DIMS = 16


def _to_wire(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        if str(x.dtype) not in _DTYPES:
            return ("__object__", f"tensor of {x.dtype}")
        flat = x.contiguous().reshape(-1)
        return ("__tensor__", str(x.dtype), tuple(x.shape), flat.view(torch.uint8).numpy().tobytes())
    if isinstance(x, tuple | list):
        return tuple(_to_wire(v) for v in x)
    if isinstance(x, dict):
        return {_to_wire(k): _to_wire(v) for k, v in x.items()}
    return x


_dumps = pickle.dumps  # bound at import: a cell that patches pickle later changes nothing here


def encode(message: Any) -> bytes:
    return _dumps(_to_wire(message), protocol=4)


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"an object of class {module}.{name}, not plain data")


class BadMessage(ValueError):
    """A submission's process sent something that is not plain data."""


def _tensor(dtype: Any, shape: Any, data: Any) -> torch.Tensor:
    """The tensor a wire triple describes, checked in full before a byte is allocated."""
    if dtype not in _DTYPES or type(shape) is not tuple or type(data) is not bytes or len(shape) > MAX_DIMS \
            or not all(type(d) is int and 0 <= d < 2**40 for d in shape):
        raise BadMessage("a malformed tensor")
    if math.prod(shape) * _ITEMSIZE[dtype] != len(data):
        raise BadMessage("a tensor whose data does not match its shape")
    if not data:
        return torch.empty(shape, dtype=_DTYPES[dtype])
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).view(_DTYPES[dtype]).reshape(shape)


def _from_wire(x: Any, depth: int = 0) -> Any:
    if depth > 40:
        raise BadMessage("nested too deeply")
    if x is None or type(x) in (bool, int, float, str):
        return x
    if type(x) is tuple:
        if len(x) == 4 and x[0] == "__tensor__":
            return _tensor(*x[1:])
        return tuple(_from_wire(v, depth + 1) for v in x)
    if type(x) is dict:
        return {_from_wire(k, depth + 1): _from_wire(v, depth + 1) for k, v in x.items()}
    raise BadMessage(f"a value of type {type(x).__name__}")


def decode(data: bytes) -> Any:
    """Plain data from `encode`, or BadMessage: never an object of any other class."""
    if len(data) > MAX_MESSAGE:
        raise BadMessage("a message too large")
    try:
        return _from_wire(_PlainUnpickler(io.BytesIO(data)).load())
    except BadMessage:
        raise
    except (Exception, RecursionError) as exc:
        raise BadMessage(f"unreadable ({type(exc).__name__}: {str(exc)[:120]})") from None
