"""The Docker Engine API through docker-py: the only module that imports ``docker``.

Builds go to ``POST /build`` with ``version=2`` (BuildKit) or ``version=1`` (classic),
the context as a tar body, through docker-py's low-level client; no docker CLI is used.
Every stream (build, pull, push) is read to its end and any in-band error becomes an
:class:`DaemonError` subclass; credentials come from the user's docker config and are
never printed. :class:`DockerDaemon` implements
:class:`~dockergen.build.daemon.ContainerDaemon`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import docker
import docker.auth
import docker.errors
import requests

from dockergen import refs
from dockergen.build.daemon import DaemonError, PullError, PushError, registry_of, split_reference
from dockergen.errors import redact


class DockerDaemon:
    """A connection to one Docker engine (``DOCKER_HOST`` or the local socket)."""

    def __init__(self, timeout: int = 3600) -> None:
        try:
            self.client = docker.from_env(timeout=timeout)
            self.api = self.client.api
            self.api.ping()
            self.version = self.api.version()
        except (docker.errors.DockerException, requests.RequestException) as exc:
            raise DaemonError(
                "cannot reach the Docker engine: " + redact(str(exc).splitlines()[0])
                + "; start dockerd or set DOCKER_HOST") from None
        self._config = docker.auth.load_config()

    # --- capabilities -----------------------------------------------------------------
    def has_buildkit(self) -> bool:
        """Whether ``/build?version=2`` is available (Linux engine, API >= 1.39)."""
        api = tuple(int(x) for x in str(self.version.get("ApiVersion", "0.0")).split("."))
        return self.version.get("Os") == "linux" and api >= (1, 39)

    def image_store(self) -> str:
        """``containerd`` when the engine keeps images in containerd, else ``classic``."""
        try:
            status = self.api.info().get("DriverStatus") or []
        except (docker.errors.APIError, requests.RequestException) as exc:
            raise DaemonError("cannot ask the engine about its image store: "
                              + redact(str(exc).splitlines()[0])) from None
        driver_type = {str(k): str(v) for k, v in status}.get("driver-type", "")
        return "containerd" if driver_type.startswith("io.containerd.snapshotter") else "classic"

    def auth_for(self, ref: str) -> dict[str, Any] | None:
        """Credentials for an image's registry from the user's docker config, if any."""
        found = docker.auth.resolve_authconfig(self._config, registry_of(ref))
        return dict(found) if found else None

    # --- images -----------------------------------------------------------------------
    def image_id(self, ref: str) -> str | None:
        """The local image id of ``ref``, or None."""
        try:
            return str(self.api.inspect_image(ref)["Id"])
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as exc:
            raise DaemonError(f"cannot inspect {ref}: {redact(exc.explanation or str(exc))}"
                              ) from None

    def inspect(self, ref: str) -> dict[str, Any]:
        """The image's inspect document; a DaemonError when it is gone (another process
        removed it between the build and its smoke tests) or the engine refuses."""
        try:
            return dict(self.api.inspect_image(ref))
        except docker.errors.ImageNotFound:
            raise DaemonError(f"{ref}: the image is gone (removed after it was built, by "
                              "another process?); build again") from None
        except docker.errors.APIError as exc:
            raise DaemonError(f"cannot inspect {ref}: {redact(exc.explanation or str(exc))}"
                              ) from None

    def pull(self, ref: str) -> None:
        """Pull ``ref`` with the user's credentials; fail on any in-band error."""
        repo, tag = split_reference(ref)
        try:
            for chunk in self.api.pull(repo, tag=tag or None, stream=True, decode=True,
                                       auth_config=self.auth_for(ref)):
                if "error" in chunk or "errorDetail" in chunk:
                    raise PullError(self._pull_message(ref, chunk.get("error", "")))
        except docker.errors.APIError as exc:
            raise PullError(self._pull_message(ref, exc.explanation or str(exc))) from None
        except requests.RequestException as exc:
            raise PullError(f"cannot pull {ref}: {redact(str(exc))}") from None

    def _pull_message(self, ref: str, detail: str) -> str:
        detail = redact(str(detail))
        hint = "check the image name and the registry"
        if any(w in detail.lower() for w in ("unauthorized", "authentication", "denied",
                                              "no basic auth")):
            hint = f"log in first: docker login {registry_of(ref)}"
        return f"cannot pull base image {ref}: {detail}; {hint}"

    def tag(self, image_id: str, ref: str) -> None:
        repo, tag = split_reference(ref)
        try:
            self.api.tag(image_id, repo, tag or None)
        except docker.errors.APIError as exc:
            raise DaemonError(f"cannot tag {ref}: {redact(exc.explanation or str(exc))}"
                              ) from None

    def remove_image(self, ref: str) -> None:
        """Remove a tag (or image) we created; missing ones are fine."""
        try:
            self.api.remove_image(ref, noprune=False)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError:
            pass  # in use or shared: leave it, never fail a cleanup

    # --- build ------------------------------------------------------------------------
    def build(self, context: bytes, *, buildkit: bool, tag: str | None,
              buildargs: dict[str, str], target: str | None, nocache: bool,
              platform: str | None, labels: dict[str, str] | None = None,
              network: str | None = None,
              exporter: dict[str, str] | None = None) -> Iterator[dict[str, Any]]:
        """Start a build and yield the decoded JSON messages of its stream."""
        params: dict[str, Any] = {
            "t": tag, "q": False, "nocache": nocache, "rm": True, "forcerm": True,
            "pull": False, "dockerfile": "Dockerfile",
            "buildargs": json.dumps(buildargs, sort_keys=True),
            "version": "2" if buildkit else "1",
        }
        if target:
            params["target"] = target
        if platform:
            params["platform"] = platform
        if labels:
            params["labels"] = json.dumps(labels, sort_keys=True)
        if network:
            params["networkmode"] = network
        if exporter and buildkit:
            params["outputs"] = json.dumps([{"type": _exporter_type(exporter),
                                             "attrs": exporter}])
        headers = {"Content-Type": "application/x-tar"}
        auths = {reg: cfg for reg in self._config.get("auths", {})
                 if (cfg := docker.auth.resolve_authconfig(self._config, reg))}
        if auths:  # classic builder pulls with these; never logged
            headers["X-Registry-Config"] = base64.urlsafe_b64encode(
                json.dumps(auths).encode()).decode()
        # docker-py's build() only speaks the classic builder; BuildKit needs version=2 on
        # the same endpoint, so post it through the low-level client's own request helpers
        # (they keep docker-py's connection handling, TLS and DOCKER_HOST support).
        try:
            response = self.api._post(self.api._url("/build"), data=context, params=params,
                                      headers=headers, stream=True, timeout=None)
            self.api._raise_for_status(response)
        except docker.errors.APIError as exc:
            raise DaemonError(f"the engine refused the build: "
                              f"{redact(exc.explanation or str(exc))}") from None
        self._response = response
        yield from self.api._stream_helper(response, decode=True)

    def cancel(self) -> None:
        """Drop the build connection: the engine cancels the build.

        Closing the response from another thread does not wake a read blocked on a silent
        build step (it was: closed at 1 s, noticed at 15 s when the next byte came, and the
        daemon never saw a disconnect). Shutting the socket down does both at once: the
        blocked read returns, and the daemon gets end-of-stream and cancels the build.
        """
        response = getattr(self, "_response", None)
        if response is None:
            return
        sock = _socket_of(response)
        if sock is not None:
            with contextlib.suppress(OSError):  # already closed: nothing left to wake
                sock.shutdown(socket.SHUT_RDWR)
        response.close()

    # --- containers (smoke tests) -------------------------------------------------------
    def run(self, image: str, command: list[str], *, entrypoint: list[str] | None = None,
            timeout: float = 300, gpus: bool = False, run_id: str = "",
            network_disabled: bool = True) -> tuple[int, str]:
        """Run a command in a fresh container; return (exit code, output). Always removed."""
        import docker.types

        kwargs: dict[str, Any] = {}
        if gpus:
            kwargs["device_requests"] = [docker.types.DeviceRequest(count=-1,
                                                                    capabilities=[["gpu"]])]
        container = self._create(image, command, entrypoint=entrypoint,
                                 labels={"dockergen.run-id": run_id},
                                 network_disabled=network_disabled, **kwargs)
        try:
            try:
                container.start()
            except docker.errors.APIError as exc:  # e.g. the executable does not exist
                raise DaemonError(f"cannot start {' '.join(command)!r} in {image}: "
                                  f"{redact(exc.explanation or str(exc))}") from None
            try:
                status = container.wait(timeout=timeout)
            except requests.RequestException:
                container.kill()
                return 124, f"timed out after {timeout:g}s"
            output = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
            return int(status.get("StatusCode", 1)), redact(output)
        finally:
            container.remove(force=True)

    def _create(self, image: str, command: list[str] | None, **kwargs: Any) -> Any:
        """A container of ``image``, or a :class:`DaemonError` with the engine's reason:
        with the containerd image store, creating one unpacks the image, which fails on a
        full disk ("no space left on device") as any engine error does, named."""
        try:
            return self.client.containers.create(image, command, **kwargs)
        except docker.errors.APIError as exc:
            raise DaemonError(f"cannot create a container of {image}: "
                              f"{redact(exc.explanation or str(exc))}") from None

    def read_file(self, image: str, path: str, limit: int) -> bytes | None:
        """A regular file of ``image`` through the archive endpoint of a container that is
        created and never started: nothing of the image runs (an image without a shell,
        or a hostile entrypoint, is read the same)."""
        import io
        import tarfile

        container = self._create(image, ["/dockergen-never-run"], entrypoint=[],
                                 network_disabled=True)
        try:
            try:
                stream, stat = container.get_archive(path)
            except docker.errors.NotFound:
                return None
            if int(stat.get("size", 0)) > limit:
                raise DaemonError(f"{path} in {image} is {stat['size']} bytes, more than the "
                                  f"{limit} read")
            data = bytearray()
            for chunk in stream:  # a tar of the one file, a little larger than it
                data += chunk
                if len(data) > limit + 65536:
                    raise DaemonError(f"{path} in {image} is more than the {limit} bytes read")
            with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
                member = tar.next()
                if member is None or not member.isfile():
                    return None
                extracted = tar.extractfile(member)
                return extracted.read(limit + 1) if extracted else None
        finally:
            container.remove(force=True)

    def serve_check(self, image: str, port: int, model: str, *, timeout: float = 300,
                    run_id: str = "", gpus: bool = False) -> tuple[bool, str]:
        """Start the image's own server on a loopback port; wait for /health, then ask for
        one token (:func:`dockergen.build.daemon.docker_serve.ask`)."""
        import docker.types

        from dockergen.build.daemon.docker_serve import ask

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            host_port = sock.getsockname()[1]
        kwargs: dict[str, Any] = {}
        if gpus:
            kwargs["device_requests"] = [docker.types.DeviceRequest(count=-1,
                                                                    capabilities=[["gpu"]])]
        container = self._create(image, None, labels={"dockergen.run-id": run_id},
                                 ports={f"{port}/tcp": ("127.0.0.1", host_port)}, **kwargs)
        try:
            container.start()
            return ask(container, f"http://127.0.0.1:{host_port}", model, timeout)
        finally:
            container.remove(force=True)

    def remove_containers(self, run_id: str) -> None:
        """Remove every container labelled with this run id (cleanup after Ctrl-C)."""
        for c in self.client.containers.list(all=True,
                                             filters={"label": f"dockergen.run-id={run_id}"}):
            c.remove(force=True)

    def history(self, ref: str) -> list[str]:
        return [str(h.get("CreatedBy", "")) for h in self.api.history(ref)]

    # --- push -------------------------------------------------------------------------
    def registry_digest(self, ref: str) -> str | None:
        """The digest the registry holds for ``ref`` (GET /distribution/REF/json)."""
        try:
            found = self.api.inspect_distribution(ref, auth_config=self.auth_for(ref))
        except docker.errors.APIError as exc:
            if _not_there(exc):
                return None
            text = redact(exc.explanation or str(exc))
            hint = (f"log in first: docker login {registry_of(ref)}" if _permanent(text)
                    else "check that the registry is reachable")
            raise PushError(f"cannot ask the registry about {ref}: {text}; {hint}") from None
        return str(found["Descriptor"]["digest"])

    def push(self, ref: str, retries: int = 3, backoff: float = 1.0,
             on_status: Callable[[str], None] | None = None) -> str:
        """Push ``ref``; return the digest the registry holds for it after the push.

        The classic image store's stream carries the pushed digest (``aux.Digest``); the
        containerd image store's does not (Engine 28), so the digest is then asked of the
        registry itself. Either way it counts only if it is one of this image's own digests
        (``RepoDigests``): a push that ended early must not report the tag's previous image.
        """
        repo, tag = split_reference(ref)
        last = ""
        for attempt in range(1, retries + 1):
            digest = None
            try:
                for chunk in self.api.push(repo, tag=tag or None, stream=True, decode=True,
                                           auth_config=self.auth_for(ref)):
                    if "error" in chunk or "errorDetail" in chunk:
                        raise PushError(redact(str(chunk.get("error") or chunk["errorDetail"])))
                    aux = chunk.get("aux") or {}
                    if aux.get("Digest"):
                        digest = str(aux["Digest"])
                digest = digest or self.registry_digest(ref)
                if digest and self._is_own_digest(ref, digest):
                    return digest
                last = (f"the registry holds {digest} for the tag, not this image"
                        if digest else "the registry did not confirm a digest")
            except PushError as exc:
                last = str(exc)
                if _permanent(last):
                    break
            except (docker.errors.APIError, requests.RequestException) as exc:
                last = redact(str(exc))
            if attempt < retries:
                if on_status:
                    on_status(f"push of {ref} failed ({last}); retrying ({attempt}/{retries})")
                time.sleep(backoff * 2 ** (attempt - 1))
        hint = (f"log in first: docker login {registry_of(ref)}" if _permanent(last)
                else "check that the registry is reachable")
        raise PushError(f"cannot push {ref}: {last}; {hint}")

    def _is_own_digest(self, ref: str, digest: str) -> bool:
        """Whether ``digest`` names the local image ``ref`` in its repository."""
        wanted = refs.parse(ref)
        try:
            own = self.api.inspect_image(ref).get("RepoDigests") or []
        except docker.errors.APIError:
            return False
        for entry in own:  # "nginx@..." and "docker.io/library/nginx@..." name one repository
            found = refs.parse(entry)
            if (found.registry, found.repository, found.digest) == (
                    wanted.registry, wanted.repository, digest):
                return True
        return False


def _exporter_type(attrs: dict[str, str]) -> str:
    """The engine's own ``moby`` image exporter, or BuildKit's plain ``image`` exporter
    when the layers' timestamps are rewritten: moby's forces ``unpack``, which BuildKit
    refuses beside ``rewrite-timestamp`` (Engine 28.5.2); the plain one stores into the
    same containerd image store, unpacked when a container first needs it."""
    return "image" if attrs.get("rewrite-timestamp") == "true" else "moby"


def _not_there(exc: docker.errors.APIError) -> bool:
    text = str(exc.explanation or exc).lower()
    return exc.status_code == 404 or "manifest unknown" in text or "not found" in text


def _permanent(message: str) -> bool:
    text = message.lower()
    return any(w in text for w in ("unauthorized", "authentication required", "denied",
                                   "no basic auth credentials"))


def _socket_of(response: Any) -> socket.socket | None:
    """The socket under a streamed requests response (unix socket, TCP or TLS)."""
    raw = getattr(response, "raw", None)
    conn = getattr(raw, "_connection", None)
    sock = getattr(conn, "sock", None)
    if isinstance(sock, socket.socket):
        return sock
    fp = getattr(getattr(raw, "_fp", None), "fp", None)  # http.client's socket file
    sock = getattr(getattr(fp, "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None
