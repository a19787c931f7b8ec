"""An embedder in a child process, for the background worker (the local model's).

A thread that embeds in the process that answers queries slows them far more than its share
of the cores: the forward pass hands CPython's GIL back and forth around every numpy call, and
a query's Python code waits at each hand-over. Measured on a 2-core machine, recall over 2,000
facts with an embedding loop running beside it: p50 / p95 25 / 29-32 ms idle, 68 / 145 ms with
the loop on a thread, 20 / 29 ms with it in another process. So
:meth:`~hmem.embedders.local.LocalEmbedder.embed_behind` sends its texts to a child process
that runs the same model (``python -m hmem.embedders.child_process``, given the embedder's
class by its import path and its arguments; started on first use, at a lower scheduling
priority: where the cores are short, the queries get them) and reads the vectors back: the
same code on the same inputs, so the same vectors as embedding in this process.

Frames on the child's stdin and stdout: a u32 length, then msgpack. A request is the texts; a
reply is (float32 rows, "") or (b"", why it failed). The child ends when its stdin closes (its
parent closed it, or ended). A child that dies is replaced (the call is sent to the new one);
when one cannot be started, or dies before its first answer, the embedder embeds in its own
process from then on.
"""

from __future__ import annotations

import importlib
import json
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

import msgspec
import numpy as np

from hmem.errors import EmbedderError

__all__ = ["ChildProcess", "main"]

_LENGTH = struct.Struct("<I")
_REPLY = msgspec.msgpack.Decoder(tuple[bytes, str])
_TEXTS = msgspec.msgpack.Decoder(list[str])
_encoder = msgspec.msgpack.Encoder()
_NICE = 10  # the child's scheduling priority below its parent's: queries first


class ChildProcess:
    """A child process embedding with ``factory(**config)`` (``factory``: ``"module:Class"``;
    its ``embed_behind`` when it has one, else its ``embed``); one call at a time."""

    def __init__(self, factory: str, config: dict[str, Any]) -> None:
        self.factory = factory
        self.config = config
        self.usable = True  # False once a child could not be started or died at once
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid = 0  # the process that started the child (a fork makes its own)
        self._answered = False
        self._lock = threading.Lock()

    def embed(self, texts: list[str], dims: int) -> np.ndarray | None:
        """The vectors of ``texts`` from the child; None when no child can serve (the caller
        embeds in its own process). A child that ended is replaced once per call;
        ``EmbedderError`` when the child's model failed."""
        try:
            request = _encoder.encode(texts)
        except (msgspec.EncodeError, UnicodeEncodeError):  # e.g. a lone surrogate: here
            return None
        with self._lock:
            for _ in range(2):
                proc = self._started()
                if proc is None:
                    return None
                assert proc.stdin is not None and proc.stdout is not None
                try:
                    _send(proc.stdin, request)
                    rows, error = _REPLY.decode(_receive(proc.stdout))
                except (OSError, EOFError, ValueError):
                    self._stop()
                    if not self._answered:  # it never served: none will
                        self.usable = False
                    self._answered = False
                    continue
                self._answered = True
                if error:
                    raise EmbedderError(error)
                return np.frombuffer(rows, dtype=np.float32).reshape(len(texts), dims).copy()
        return None

    def close(self) -> None:
        """End the child (it exits when its stdin closes)."""
        with self._lock:
            self._stop()

    def _started(self) -> subprocess.Popen[bytes] | None:
        if self._proc is not None and self._proc.poll() is None and self._pid == os.getpid():
            return self._proc
        self._proc = None
        if not self.usable:
            return None
        root = str(Path(__file__).resolve().parents[2])  # where the hmem package is
        path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "hmem.embedders.child_process", self.factory,
                 json.dumps(self.config)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        except OSError:
            self.usable = False
            return None
        self._pid = os.getpid()
        return self._proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or self._pid != os.getpid():
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _send(stream: IO[bytes], body: bytes) -> None:
    stream.write(_LENGTH.pack(len(body)) + body)
    stream.flush()


def _receive(stream: IO[bytes]) -> bytes:
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError("the stream ended")
    (n,) = _LENGTH.unpack(head)
    body = stream.read(n)
    if len(body) < n:
        raise EOFError("the stream ended inside a frame")
    return body


def main() -> None:
    """The child: embed each request's texts until stdin closes."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a library prints goes to stderr, not into the frames
    try:
        os.nice(_NICE)
    except OSError:
        pass
    module, _, name = sys.argv[1].partition(":")
    embedder = getattr(importlib.import_module(module), name)(**json.loads(sys.argv[2]))
    embed = getattr(embedder, "embed_behind", embedder.embed)
    requests = sys.stdin.buffer
    while True:
        try:
            texts = _TEXTS.decode(_receive(requests))
        except EOFError:
            return
        try:
            reply = (np.asarray(embed(texts), dtype=np.float32).tobytes(), "")
        except Exception as e:  # noqa: BLE001 (sent to the parent, which raises it)
            reply = (b"", f"{type(e).__name__}: {e}")
        _send(replies, _encoder.encode(reply))


if __name__ == "__main__":
    main()
