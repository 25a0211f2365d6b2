"""The submission's side of grading: runs in the isolated process the sandbox forks, executes the
notebook's cells one at a time (IPython, in this process: no kernel, no ports) and probes the
answers on request. It never judges: it sends plain outputs back over the socket the grader
owns, each reply tagged with the grader's nonce, and the grader checks and judges them.

What it uses (the socket's methods, the encoder, the probe) is bound before the first cell
runs, so a cell that patches modules (torch.save, pickle, importlib.reload, this package on disk
or in memory) does not change how replies are made; and whatever it sends, the grader reads
only plain data and compares it with reference outputs that never left the grader.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import socket
import struct
from types import FunctionType, ModuleType
from typing import Any

HEADER = struct.Struct(">Q")


def private(*modules: ModuleType) -> dict[str, Any]:
    """Copies of the modules' functions that look each other up in one private namespace: a cell
    that replaces `gpt2_course.grading.probing.probe` (or any other) changes none of them."""
    space: dict[str, Any] = {}
    for m in modules:
        space.update(vars(m))
    for name, obj in list(space.items()):
        wrap = contextlib.contextmanager if hasattr(obj, "__wrapped__") else None
        fn = obj.__wrapped__ if wrap else obj
        if isinstance(fn, FunctionType) and fn.__module__ in {m.__name__ for m in modules}:
            copy = FunctionType(fn.__code__, space, fn.__name__, fn.__defaults__, fn.__closure__)
            copy.__kwdefaults__ = fn.__kwdefaults__
            space[name] = wrap(copy) if wrap else copy
    return space


def serve_submission(conn: socket.socket, exercise_id: str, nonce: str) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # nothing the notebook prints reaches anyone
        os.dup2(null, fd)
    recv_into, sendall, loads = conn.recv, conn.sendall, pickle.loads
    unpack, pack = HEADER.unpack, HEADER.pack

    def recv_exact(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            try:
                chunk = recv_into(n - len(buf))
            except KeyboardInterrupt:  # a late interrupt for a cell that had just finished
                continue
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    from gpt2_course.grading import judging, probing
    from gpt2_course.grading.questions import get_exercise

    engine = private(probing, judging)
    run_probe, encode, own, raised = engine["run_probe"], engine["encode"], engine["own"], engine["raised"]

    questions = {}
    for q in get_exercise(exercise_id).questions:  # the worker needs no reference and no mistakes
        q.course, q.reference, q.mistakes = own(q), None, []
        questions[q.id] = q
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    missing = object()

    def send(*message: Any) -> None:
        data = encode((nonce, *message))
        sendall(pack(len(data)) + data)

    send("ready")
    while True:
        try:
            request = loads(recv_exact(unpack(recv_exact(HEADER.size))[0]))
        except EOFError:
            return
        if request[0] == "cell":
            try:
                result = shell.run_cell(request[1], store_history=True)
                err = result.error_before_exec or result.error_in_exec
            except BaseException as exc:  # an interrupt between IPython's own handlers
                err = exc
            status = "ok" if err is None else "interrupted" if isinstance(err, KeyboardInterrupt) else "error"
            send("cell", status, "" if err is None else f"{type(err).__name__}: {str(err)[:200]}")
        elif request[0] == "probe":
            q = questions[request[1]]
            answer = shell.user_ns.get(q.name, missing)
            try:
                status, outs = ("missing", None) if answer is missing else run_probe(q, answer, request[2])
                send("probe", q.id, status, outs)
            except BaseException as exc:  # an output that cannot be encoded, an interrupt
                send("probe", q.id, f"error:{raised(exc)[1]}: {raised(exc)[2][:100]}", None)
        else:
            return
