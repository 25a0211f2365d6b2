"""The one channel between the grader and a submission's process (gpt2_course/grading/wire.py): one
size limit checked before anything is read or allocated, one deadline per message however slowly
its bytes come, a tensor's size checked against its bytes before it exists; and no framing code
anywhere else in the package."""
from __future__ import annotations

import re
import socket
import threading
import time
from pathlib import Path

import pytest
import torch

import gpt2_course
from gpt2_course.grading import wire


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_a_message_round_trips_and_none_means_none_began(pair):
    a, b = pair
    wire.send(a, b"hello")
    assert wire.recv(b, timeout=5) == b"hello"
    assert wire.recv(b, timeout=0.2) is None  # nothing began: no message, no error


def test_an_announced_size_over_the_limit_is_refused_before_reading_it(pair):
    a, b = pair
    a.sendall(wire.HEADER.pack(wire.MAX_MESSAGE + 1))  # and no body at all
    with pytest.raises(wire.FrameError, match="over the limit"):
        wire.recv(b, timeout=5)
    with pytest.raises(wire.FrameError, match="over the limit"):
        wire.send(a, b"x" * (wire.MAX_MESSAGE + 1))


def test_the_deadline_is_per_message_not_per_read(pair):
    """A peer that sends a byte every 0.1 s never lets one read wait long: a limit per read would
    wait for ever; the message's deadline ends it."""
    a, b = pair
    stop = threading.Event()

    def trickle():
        a.sendall(wire.HEADER.pack(1000))
        while not stop.is_set():
            a.sendall(b"x")
            time.sleep(0.1)

    writer = threading.Thread(target=trickle, daemon=True)
    writer.start()
    start = time.monotonic()
    try:
        with pytest.raises(wire.FrameError, match="half-way"):
            wire.recv(b, timeout=1.0)
    finally:
        stop.set()
        writer.join(5)
    assert time.monotonic() - start < 20  # ended by the deadline (1 s), not by the 1000th byte


def test_a_tensor_is_checked_against_its_bytes_before_it_is_allocated(monkeypatch):
    """A reply that claims a 4 TiB tensor and carries 8 bytes is refused without allocating it."""
    def no_allocation(*args, **kwargs):
        raise AssertionError("allocated before checking")

    monkeypatch.setattr(wire.torch, "empty", no_allocation)
    claim = wire.encode([("__tensor__", "torch.float64", (2**39,), b"\x00" * 8)])
    with pytest.raises(wire.BadMessage, match="does not match its shape"):
        wire.decode(claim)
    for shape in ((-1,), (2**41,), (1,) * 17, (2.0,)):
        with pytest.raises(wire.BadMessage, match="malformed"):
            wire.decode(wire.encode([("__tensor__", "torch.float64", shape, b"")]))
    back = wire.decode(wire.encode([torch.arange(6, dtype=torch.int32).reshape(2, 3)]))[0]
    assert back.dtype == torch.int32 and back.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_no_framing_code_outside_the_wire_module():
    """Issue 26 found the framing written three times, with different limits."""
    framing = re.compile(r"struct\.Struct|\.recv_into\(|(?<!wire)\.recv\(|sendall\(|send_fds|recv_fds"
                         r"|MAX_MESSAGE\s*=")
    package = Path(gpt2_course.__file__).parent
    found = [f"{p.relative_to(package)}:{i}" for p in package.rglob("*.py") if p.name != "wire.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if framing.search(line)]
    assert found == []
