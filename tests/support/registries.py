"""The two local registries the daemon tests push to and pull from.

``ANON`` (anonymous) and ``AUTH`` (htpasswd, user ``USER``) are Debian's ``docker-registry``
(distribution 2.8, installed by tests/infra/provision.sh). The test session owns them: a test
that asks for the ``registries`` fixture (tests/conftest.py) finds both answering, because
before every such test each one is probed and, if nothing listens on its port, started with
its data under ``DOCKERGEN_TEST_STATE``. A registry started before the session (an older
provisioning, a developer's own) that answers as this one is used as it is.

Why the session and not provisioning: in a CI run the anonymous registry that provisioning had
started was gone by the time the daemon tests pushed, and every push failed with "connection
refused", with nothing left to say why. Now a registry that stops between two tests is started
again, the next test runs, and the session's summary says which one stopped, before which
test, how it ended (its exit status, when the session had started it) and its last log lines. A port
held by something that is not this registry fails the test that needs it, naming the port,
never taken for the registry. At its end the session stops the processes it started and
removes their data, nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

STATE = Path(os.environ.get("DOCKERGEN_TEST_STATE", "/tmp/dockergen-test"))
ANON = os.environ.get("DOCKERGEN_TEST_REGISTRY", "localhost:5000")
AUTH = os.environ.get("DOCKERGEN_TEST_AUTH_REGISTRY", "localhost:5001")
USER = os.environ.get("DOCKERGEN_TEST_AUTH_USER", "dgtest")
PASSWORD = os.environ.get("DOCKERGEN_TEST_AUTH_PASS", "dgtest-secret-pass")
REALM = "dockergen-test"
START_S = 30


class RegistryProblem(Exception):
    """A registry the tests need cannot be had; the message says why and what to do."""


@dataclass
class Registry:
    """One ``docker-registry serve`` on 127.0.0.1, with its config, data and log in
    ``state/name``; ``login`` makes it an htpasswd registry that needs that user."""

    name: str
    address: str
    state: Path = STATE
    login: tuple[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None
    seen: bool = False
    events: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    @property
    def folder(self) -> Path:
        return self.state / self.name

    def probe(self) -> str | None:
        """None when this registry answers ``/v2/`` as itself; otherwise what answered, or
        ``""`` when nothing listens on the port."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v2/", timeout=5) as resp:
                status, headers = resp.status, resp.headers
        except urllib.error.HTTPError as exc:
            status, headers = exc.code, exc.headers
        except (urllib.error.URLError, OSError):
            return ""
        api = headers.get("Docker-Distribution-Api-Version", "")
        challenge = headers.get("Www-Authenticate", "")
        wanted = 401 if self.login else 200
        if api == "registry/2.0" and status == wanted and \
                (not self.login or f'realm="{REALM}"' in challenge):
            return None
        return f"HTTP {status}, API {api or 'none'}, challenge {challenge or 'none'}"

    def ensure(self, before: str) -> None:
        """Make this registry answer before the test ``before``; raises RegistryProblem."""
        answer = self.probe()
        if answer is None:
            self.seen = True
            return
        if answer:
            raise RegistryProblem(
                f"{self.address} answers, but not as the test registry ({answer}): something "
                f"else holds port {self.port} (`ss -ltnp 'sport = :{self.port}'` names it); "
                "stop it, or point DOCKERGEN_TEST_REGISTRY / DOCKERGEN_TEST_AUTH_REGISTRY at "
                "free ports")
        if self.seen:
            self.events.append(f"{self.address} stopped answering before {before} "
                               f"({self._how_it_ended()}); started again. Its log ended:\n"
                               + self.log_tail())
        self._start()
        self.seen = True

    def _how_it_ended(self) -> str:
        if self.process is None:
            return "started outside this session"
        code = self.process.poll()
        if code is None:
            return "still running, but not answering"
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exit status {code}"

    def log_tail(self, lines: int = 15) -> str:
        log = self.folder / "log"
        if not log.is_file():
            return "  (no log)"
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join("  " + line[:300] for line in tail)

    def _start(self) -> None:
        binary = shutil.which("docker-registry")
        if binary is None:
            raise RegistryProblem("docker-registry is not installed: run tests/infra/provision.sh")
        self._reap()  # a process that no longer answers is not left behind; its data stays
        self.folder.mkdir(parents=True, exist_ok=True)
        config: dict[str, object] = {
            "version": 0.1,
            "storage": {"filesystem": {"rootdirectory": str(self.folder / "data")},
                        "delete": {"enabled": True}},
            "http": {"addr": f"127.0.0.1:{self.port}"}}
        if self.login:
            htpasswd = self.folder / "htpasswd"
            entry = subprocess.run(["htpasswd", "-Bbn", *self.login], capture_output=True,
                                   text=True, check=True).stdout
            htpasswd.write_text(entry)
            config["auth"] = {"htpasswd": {"realm": REALM, "path": str(htpasswd)}}
        (self.folder / "config.yml").write_text(json.dumps(config))  # JSON is YAML
        with open(self.folder / "log", "ab") as log:
            self.process = subprocess.Popen(
                [binary, "serve", str(self.folder / "config.yml")], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_S
        while self.probe() is not None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RegistryProblem(f"{self.address} did not start ({self._how_it_ended()});"
                                      f" its log ends:\n{self.log_tail()}")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop the process this session started, if any, and remove its data."""
        if self.process is not None:
            self._reap()
            shutil.rmtree(self.folder / "data", ignore_errors=True)

    def _reap(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


REGISTRIES = (Registry("registry-anon", ANON),
              Registry("registry-auth", AUTH, login=(USER, PASSWORD)))
