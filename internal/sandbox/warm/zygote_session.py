"""boxer's session kernel: one interpreter that runs cell after cell, as a
notebook kernel does, in a warm child of the sessions' zygote.

zygote.py hands over to serve() in the job's process once the child is
isolated and unprivileged, instead of running a one-shot job; from there on
this process is caller code's as much as boxer's. Its socket to boxer is the
child's job socket, which caller code can reach too: boxer reads what comes
back as untrusted (sizes bounded, fields checked, descriptors closed), and
whatever caller code writes there only garbles its own session.

Each cell arrives as a Cell message with the cell's stdout and stderr as two
descriptors; its answer is zero or more figure chunks, then one done, each
carrying the cell's seq (see protocol.go for the messages).
"""

import ast
import base64
import json
import os
import socket
import sys
import traceback
import _signal

MAX_MSG = 1 << 20
# A trailing expression's repr, and the figures of one cell, are cut here:
# boxer cuts them again, this bound only keeps the messages few.
MAX_VALUE = 64 << 10
MAX_FIGURES = 8 << 20
# One figure message: base64 of at most this many bytes, well inside the
# socket's send buffer (a packet larger than it is refused outright).
CHUNK = 48 << 10


def serve(sock, main, exit_code):
    """Runs cells from sock in the namespace of module main until boxer
    closes the socket; exit_code turns a SystemExit into the exit code a
    script would have (zygote.py's)."""
    _ignore_interrupts()
    null = os.open("/dev/null", os.O_RDWR)
    while True:
        msg, fds, _, _ = socket.recv_fds(sock, MAX_MSG, 2)
        if not msg:
            os._exit(0)  # boxer ended the session
        try:
            cell = json.loads(msg)
            if sorted(cell) != ["code", "op", "seq"] or cell["op"] != "cell" or len(fds) != 2:
                raise ValueError("malformed cell: fields %s, %d descriptors" % (sorted(cell), len(fds)))
        except ValueError as e:
            for fd in fds:
                os.close(fd)
            sock.send(json.dumps({"op": "done", "seq": -1, "exit_code": 1, "error": "boxer: %s" % e}).encode())
            continue
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        done = _cell(cell["code"], main, exit_code)
        done["seq"] = seq = cell["seq"]
        figures = _figures()
        _flush()
        # The cell's streams end here for the kernel: boxer reads them to
        # EOF (or, if a process of the cell still holds them, stops soon).
        os.dup2(null, 1)
        os.dup2(null, 2)
        for i in range(0, len(figures), CHUNK):
            sock.send(json.dumps({"op": "figure", "seq": seq, "data": base64.b64encode(figures[i:i + CHUNK]).decode(),
                                  "last": i + CHUNK >= len(figures)}).encode())
        sock.send(json.dumps(done).encode())


def _cell(code, main, exit_code):
    """Runs one cell in main's namespace and returns its done message: the
    exit code a script of the same code would have (0, 1 for an uncaught
    exception, SystemExit's code), the repr of a trailing expression, and
    whether SIGINT (boxer's timeout) interrupted it. The session goes on
    whatever the cell did."""
    done = {"op": "done", "exit_code": 0}
    try:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        try:
            value = _run(code, main.__dict__)
        finally:
            _ignore_interrupts()
        if value is not None:
            main.__dict__["_"] = value
            text = repr(value)
            done["value"] = text[:MAX_VALUE] + ("..." if len(text) > MAX_VALUE else "")
    except SystemExit as e:
        done["exit_code"] = exit_code(e)
    except BaseException as e:
        _ignore_interrupts()
        done["exit_code"] = 1
        done["error"] = "%s: %s" % (type(e).__name__, e)
        if isinstance(e, KeyboardInterrupt):
            done["interrupted"] = True
        # Drop the kernel's frames: the traceback shows the cell's code.
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        try:
            traceback.print_exception(type(e), e, tb)
        except BaseException:
            pass
    return done


def _run(code, ns):
    """Executes code in ns and returns the value of its last statement if
    that is an expression, as an interactive interpreter shows it."""
    tree = ast.parse(code, "<cell>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<cell>", "exec"), ns)
    if last is not None:
        return eval(compile(last, "<cell>", "eval"), ns)
    return None


def _ignore_interrupts():
    """SIGINT is boxer's way to stop a cell; between cells it is ignored. A
    KeyboardInterrupt that fires while the handler is being changed is
    dropped and the change made again."""
    while True:
        try:
            _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
            return
        except KeyboardInterrupt:
            pass


def _figures():
    """The PNGs of the figures the cell left open in matplotlib's pyplot
    (if the cell used it), closed once drawn, as a notebook's inline
    backend shows them: each PNG prefixed by its length (4 bytes, big
    endian), at most MAX_FIGURES in all."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return b""
    import io

    out = b""
    try:
        for num in plt.get_fignums():
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png")
            png = buf.getvalue()
            if len(out) + 4 + len(png) <= MAX_FIGURES:
                out += len(png).to_bytes(4, "big") + png
        plt.close("all")
    except Exception as e:
        print("boxer: drawing the cell's figures failed: %s: %s" % (type(e).__name__, e), file=sys.stderr)
    return out


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except Exception:
            pass
