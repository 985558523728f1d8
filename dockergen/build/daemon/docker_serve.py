"""The serve check's HTTP side: the image's own server, started by
:meth:`dockergen.build.daemon.docker.DockerDaemon.serve_check` on a loopback port, must answer
``/health`` and then give one completion token. Plain ``urllib`` to 127.0.0.1 only; the
container is docker-py's, read through the few calls used here.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from dockergen.errors import redact


def ask(container: Any, base: str, model: str, timeout: float) -> tuple[bool, str]:
    """Wait up to ``timeout`` seconds for ``base``/health (a server that exits fails at
    once, with its last log lines), then ask ``/v1/completions`` for one token."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=5) as resp:
                if resp.status == 200:
                    break
        except (urllib.error.URLError, OSError):
            pass
        container.reload()
        if container.status == "exited":
            logs = container.logs(tail=20).decode("utf-8", "replace")
            return False, "the server exited: " + redact(logs.strip()[-500:])
        if time.monotonic() > deadline:
            return False, f"/health did not answer within {timeout:g}s"
        time.sleep(1)
    body = json.dumps({"model": model, "prompt": "Hello", "max_tokens": 1}).encode()
    request = urllib.request.Request(f"{base}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            answer = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return False, f"/v1/completions failed: {exc}"
    ok = bool(answer.get("choices"))
    return ok, "one-token completion ok" if ok else f"unexpected answer {answer}"
