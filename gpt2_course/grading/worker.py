"""The submission's side of grading: runs in the isolated process the sandbox forks, executes the
notebook's cells one at a time (IPython, in this process: no kernel, no ports) and runs each
question's test cases, as the grader sends them, on the answer the notebook defined.

It judges nothing and holds nothing worth forging: no reference, no planted mistake and none of
the exercise's course objects exist in this process (source.py, plans.py), so a cell that walks
the interpreter's frames, patches the engine or sends replies of its own can only report outputs
it computed itself. The grader reads them as plain data and compares them with reference
outputs that never left the grader.
"""
from __future__ import annotations

import os
import pickle
import socket
from typing import Any

from gpt2_course.grading import plans, wire
from gpt2_course.grading.probing import QuestionTimeout, raised, run_cases, time_limit


def _shell() -> Any:
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    return InteractiveShell.instance(config=config)


def serve_submission(conn: socket.socket) -> None:
    def send(*message: Any) -> None:
        wire.send(conn, wire.encode(message))

    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # nothing the notebook prints reaches anyone
            os.dup2(null, fd)
        shell = _shell()
    except Exception as exc:  # before the first cell: the grader's failure, not the notebook's
        send("setup-failed", f"{type(exc).__name__}: {exc}")
        return
    missing = object()
    send("ready")
    while True:
        try:
            request = pickle.loads(wire.recv(conn, patient=True))  # the grader's: trusted
        except wire.FrameError:
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
            qid, name, timeout, plan = request[1:]
            answer = shell.user_ns.get(name, missing)
            try:
                if answer is missing:
                    send("probe", qid, "missing", None)
                    continue
                runs = None if plan is None else [run for _, run in plans.cases(plan)]
                with time_limit(timeout):
                    outs = run_cases(runs, answer)
                send("probe", qid, "ok", outs)
            except QuestionTimeout:
                send("probe", qid, "timeout", None)
            except BaseException as exc:  # an output that cannot be encoded, an interrupt
                send("probe", qid, f"error:{raised(exc)[1]}: {raised(exc)[2][:100]}", None)
        else:
            return
