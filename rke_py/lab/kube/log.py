"""klog-like one-line logging to stderr, so `docker logs` tails explain what a component did."""

import os
import sys
import threading
import time
from typing import NoReturn

_component = "kube"
_lock = threading.Lock()


def set_component(name: str) -> None:
    global _component
    _component = name


def _emit(level: str, msg: str) -> None:
    now = time.time()
    stamp = time.strftime("%m%d %H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}"
    with _lock:
        sys.stderr.write(f"{level}{stamp} {os.getpid():7d} {_component}] {msg}\n")
        sys.stderr.flush()


def info(msg: str) -> None:
    _emit("I", msg)


def warning(msg: str) -> None:
    _emit("W", msg)


def error(msg: str) -> None:
    _emit("E", msg)


def fatal(msg: str, code: int = 1) -> NoReturn:
    """Log and end the process, as klog.Fatal does, so the container's last log line says why."""
    _emit("F", msg)
    raise SystemExit(code)
