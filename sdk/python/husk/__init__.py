"""husk: microVM sandboxes for jobs and AI agents' tool calls.

    import husk

    with husk.Sandbox(template="base") as sb:
        r = sb.run("echo hello")
        print(r.exit_code, r.text)

    print(husk.run(["uname", "-a"]).text)

The SDK talks to ``husk serve`` over its Unix socket (``socket=``, else
``$HUSK_SERVER``, else /run/husk/serve.sock). ``husk.aio`` has the same
surface for asyncio. See docs/python.md.
"""

from ._wire import CommandResult, Event
from .client import Connection, Sandbox, health, run
from .errors import (BadRequest, Busy, CommandFailed, Conflict, ConnectionFailed, Failed,
                     HuskError, Internal, NotFound, PolicyDenied, ProtocolError, SandboxGone,
                     ShuttingDown, TargetExists, Timeout, Unsupported)

__version__ = "0.1.0"

__all__ = [
    "Sandbox", "run", "health", "Connection", "CommandResult", "Event",
    "HuskError", "ConnectionFailed", "ProtocolError", "BadRequest", "Unsupported",
    "NotFound", "SandboxGone", "Busy", "Conflict", "Failed", "ShuttingDown", "Internal",
    "PolicyDenied", "Timeout", "CommandFailed", "TargetExists",
]
