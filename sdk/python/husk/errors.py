"""Errors of the husk SDK: every failure the daemon reports is an exception.

Each daemon error code (docs/api.md) has its own class, so callers can
catch exactly what they can handle: ``Busy`` to retry later,
``SandboxGone`` when a sandbox ended under them, ``PolicyDenied`` when an
egress rule was refused. ``Timeout`` is a command that ran out of time.
"""

from __future__ import annotations

from typing import Any


class HuskError(Exception):
    """A request failed. ``code`` is the daemon's error code ("" if the
    failure is the client's own), ``message`` its text, ``reply`` the whole
    final line (it may hold ``load`` or ``record``)."""

    code = ""

    def __init__(self, message: str, code: str | None = None,
                 reply: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.reply = reply or {}

    def __str__(self) -> str:
        return "%s: %s" % (self.code, self.message) if self.code else self.message


class ConnectionFailed(HuskError):
    """The daemon's socket could not be reached, or it went away."""


class ProtocolError(HuskError):
    """The daemon sent something that is not the protocol."""


class TargetExists(HuskError):
    """A download would replace a name that exists in its host directory
    (and ``overwrite`` was not given): nothing was copied."""


class BadRequest(HuskError):
    code = "bad-request"


class Unsupported(HuskError):
    code = "unsupported"


class NotFound(HuskError):
    code = "not-found"


class SandboxGone(NotFound):
    """The sandbox is no longer there (ended, killed, timed out, or not yours):
    the daemon's ``gone``, or ``not-found`` for an operation on a sandbox."""


class Busy(HuskError):
    """The daemon's queue is full; ``load`` says how full everything is."""
    code = "busy"

    @property
    def load(self) -> dict[str, Any]:
        return self.reply.get("load") or {}


class Conflict(HuskError):
    code = "conflict"


class Failed(HuskError):
    """The VM or the guest failed; ``record`` is the run's record if one came."""
    code = "failed"

    @property
    def record(self) -> dict[str, Any]:
        return self.reply.get("record") or {}


class ShuttingDown(HuskError):
    code = "shutting-down"


class Internal(HuskError):
    code = "internal"


class PolicyDenied(BadRequest):
    """An egress rule (allow, allow_hosts, deny) was refused: malformed in a
    ``policy`` request, or (code ``forbidden``) opening what the daemon keeps
    closed to this client in ``run``, ``create`` or ``policy``."""


class Timeout(HuskError):
    """A command ran past its timeout and was killed; ``result`` is what it
    produced until then."""
    code = "timeout"

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class CommandFailed(HuskError):
    """``check=True`` and the command did not exit 0; ``result`` has its output."""
    code = "exit"

    def __init__(self, message: str, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


_BY_CODE: dict[str, type[HuskError]] = {
    c.code: c for c in (BadRequest, Unsupported, NotFound, Busy, Conflict, Failed,
                        ShuttingDown, Internal)
}


def from_reply(reply: dict[str, Any], op: str = "") -> HuskError:
    """The exception for a final line that carries ``error``."""
    err = reply.get("error")
    if not isinstance(err, dict):
        return ProtocolError("an error line without an error object: %r" % (reply,))
    code = str(err.get("code", ""))
    message = str(err.get("message", "")) or code
    cls = SandboxGone if code == "gone" else _BY_CODE.get(code, HuskError)
    if cls is NotFound and op not in ("", "run", "create", "health", "list"):
        cls = SandboxGone
    if (cls is BadRequest and op == "policy") or code == "forbidden":
        cls = PolicyDenied
    return cls(message, code=code, reply=reply)
