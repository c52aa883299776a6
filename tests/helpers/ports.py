"""A free TCP port for a process group or cluster a test starts: tests of several environments run at once on one
machine (CI's launches beside the session), so none may take a fixed port such as torchrun's 29500."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A port no socket holds now (the kernel's pick for a bind to port 0)."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]
