"""The deployment profile: the one source of truth for what a profile may say.

A closed pydantic model: unknown keys are errors, values are strictly typed (a YAML
number never becomes a version string by accident), every string that can reach the
Dockerfile is checked against a narrow pattern, and the model is frozen after loading.
The JSON Schema for editors is generated from these classes (``dockergen schema``).
May import: :mod:`dockergen.engine_names` (the engine choices), :mod:`dockergen.errors`,
:mod:`dockergen.refs` (the image-reference grammar).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PlainValidator,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import core_schema

from dockergen import refs
from dockergen.engine_names import FOLDERS
from dockergen.errors import holds_secret

if TYPE_CHECKING:
    EngineName = str
else:  # engine.name's choices: the registered engines, in the registry's order
    EngineName = Literal[tuple(FOLDERS)]

# --- string shapes ------------------------------------------------------------------
# Each pattern is deliberately narrow: these values end up in Dockerfile instructions,
# shell commands and labels, so nothing outside them may pass (no quotes, spaces,
# newlines, `$`, backslashes or `;`).

# token counts and positions are int32 in the engines' tensors (torch.int32 positions,
# block tables): a larger value is a typo that would reach the server command
_INT32_MAX = 2**31 - 1
# a TCP port, 1-65535
_PORT = r"(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
# (pattern, what it accepts in words) by shape name; the command line checks its own
# values (an index URL, a scrape target) by the same shapes
PATTERNS: dict[str, tuple[re.Pattern[str], str]] = {
    "name": (re.compile(r"[a-z0-9][a-z0-9-]{0,62}"),
             "lowercase letters, digits and '-', starting with a letter or digit"),
    "cuda_version": (re.compile(r"\d{1,2}\.\d{1,2}\.\d{1,2}"), "a CUDA version like \"13.0.2\""),
    "python_version": (re.compile(r"3\.\d{1,2}"), "a Python version like \"3.12\""),
    "package_version": (re.compile(r"\d+(\.\d+){0,3}((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?"),
                        "a release version like \"0.33.0\""),
    "model": (re.compile(r"[A-Za-z0-9_/][A-Za-z0-9._/@+-]{0,255}"),
              "an absolute path in the image or a Hugging Face id like \"org/model\""),
    "host": (re.compile(r"(\d{1,3}(\.\d{1,3}){3}|::|\[?[0-9a-fA-F:]+\]?|localhost)"),
             "an IP address like \"0.0.0.0\""),
    "extra_arg": (re.compile(r"--[a-z0-9][a-z0-9_-]*(=[A-Za-z0-9._/:,@+-]*)?"
                             r"|[A-Za-z0-9._/:,@+-]+"),
                  "a flag like \"--enforce-eager\" or \"--seed=0\", or a plain value"),
    "env_name": (re.compile(r"[A-Z_][A-Z0-9_]{0,127}"),
                 "an environment variable name like VLLM_LOGGING_LEVEL"),
    "env_value": (re.compile(r"[A-Za-z0-9._/:,@+=-]{0,512}"),
                  "letters, digits and ._/:,@+=- only"),
    "label_key": (re.compile(r"[a-z0-9]+([.-][a-z0-9]+)*"),
                  "a reverse-DNS label key like com.example.team"),
    "tag_template": (re.compile(r"[A-Za-z0-9_{}.-]{1,128}"),
                     "a tag like \"{engine.version}-cu{cuda.major_minor}\""),
    "url": (re.compile(r"https?://[A-Za-z0-9.-]+(:\d{1,5})?(/[A-Za-z0-9._~/-]*)?"),
            "an http(s) URL without credentials, query or spaces"),
    "sha256": (re.compile(r"[0-9a-f]{64}"), "a sha256 digest: 64 lowercase hex digits"),
    "git_commit": (re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}"),
                   "a full git commit id: 40 (or 64) lowercase hex digits"),
    "file_path": (re.compile(r"[A-Za-z0-9._/-]{1,255}"), "a relative or absolute file path"),
    "pip_pin": (re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,99})(?:\[[A-Za-z0-9,._-]{1,100}\])?"
                           r"==\d+(\.\d+){0,3}((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?"),
                "an exact pin like \"transformers==4.57.1\" (NAME==VERSION)"),
    "apt_name": (re.compile(r"[a-z0-9][a-z0-9+.-]{1,62}"), "a Debian/Ubuntu package name"),
    # a file on the build host, read by dockergen and never written into the Dockerfile
    # (certificates are copied as certs/extra-N.crt), so any printable path is safe
    "host_path": (re.compile(r"[^\x00-\x1f\x7f]{1,4096}"),
                  "a file path without control characters"),
    # An image reference whose tag may hold tag-template placeholders (image.cache_ref);
    # the expanded result is checked by the reference grammar (dockergen/fleet/bake.py).
    "ref_template": (re.compile(r"[a-z0-9{][A-Za-z0-9._/:{}-]{0,254}"),
                     "an image reference like \"registry.example.com/cache/vllm:{name}\""),
    "field_path": (re.compile(r"[a-z_]+(\.[a-z_]+){0,3}"),
                   "a dotted profile field like quantization.weights"),
    "duration": (re.compile(r"[1-9][0-9]{0,4}(ms|s|m|h)"),
                 "a Prometheus duration like \"30s\", \"5m\" or \"1h\""),
    "scrape_target": (re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}:" + _PORT),
                      "a host:port scrape target (port 1-65535) like "
                      "\"vllm-0.example.internal:8000\""),
}

# Printable text (labels, description): no control, format (e.g. bidi overrides), separator
# or surrogate characters; quoting is done on output.
_TEXT_MAX = 300


# A valid value of each shape: the example a problem's fix gives (in the form the bad value
# was written in), checked against the schema by tests/unit/input/test_schema.py.
_EXAMPLES: dict[str, str] = {
    "name": "h100-fp8", "cuda_version": "13.0.2", "python_version": "3.12",
    "package_version": "0.33.0", "image_ref": "registry.example.com/llm/cuda-base:1.0",
    "image_repo": "registry.example.com/llm/vllm", "model": "/models/llama-3-8b-instruct",
    "host": "0.0.0.0", "extra_arg": "--enforce-eager", "env_name": "VLLM_LOGGING_LEVEL",
    "env_value": "INFO", "label_key": "com.example.team",
    "tag_template": "{engine.version}-cu{cuda.major_minor}-{name}",
    "url": "https://mirror.example.com/simple", "sha256": "e3b0c44298fc1c149afbf4c8996fb924"
    "27ae41e4649b934ca495991b7852b855", "git_commit": "0123456789abcdef0123456789abcdef01234567",
    "file_path": "config.json", "pip_pin": "transformers==4.57.1", "apt_name": "libnuma1",
    "host_path": "certs/proxy.crt", "ref_template": "registry.example.com/cache/vllm:{name}",
    "field_path": "quantization.weights", "duration": "5m",
    "scrape_target": "vllm-0.example.internal:8000",
}


class ShapeError(ValueError):
    """A text value of the wrong shape; ``example`` is a valid value of the same field."""

    def __init__(self, message: str, example: str) -> None:
        super().__init__(message)
        self.example = example


@dataclass(frozen=True)
class _Form:
    """Annotation of a text field with a narrow form: the check the model runs, the same
    form in the JSON Schema (``pattern``, ``format``, ``maxLength``: what editors and
    ``dockergen schema`` show), and an example for the fix of a problem."""

    check: Callable[[str], str]
    schema: tuple[tuple[str, Any], ...]
    example: str

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        def validate(value: str) -> str:
            try:
                return self.check(value)
            except ShapeError:
                raise
            except ValueError as exc:
                raise ShapeError(str(exc), self.example) from None

        return core_schema.no_info_after_validator_function(validate, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any,
                                     handler: GetJsonSchemaHandler) -> dict[str, Any]:
        out = handler(schema)
        out.update(self.schema)
        return dict(out)


def json_pattern(regex: re.Pattern[str]) -> str:
    """A whole-value ``fullmatch`` pattern as a JSON Schema (ECMA-262) ``pattern``, which
    matches anywhere unless anchored."""
    return f"^(?:{regex.pattern})$"


def _shaped(kind: str) -> _Form:
    regex, what = PATTERNS[kind]

    def check(value: str) -> str:
        if not regex.fullmatch(value):
            raise ValueError(f"{_show(value)} is not {what}")
        return value

    return _Form(check, (("pattern", json_pattern(regex)),), _EXAMPLES[kind])


def _show(value: str) -> str:
    """Quote a rejected value for a message, short and without control characters, and
    never a credential (cut short, a token would escape the redaction of the message)."""
    if holds_secret(value):
        return "(a value shaped like a credential, not shown)"
    shown = value if len(value) <= 60 else value[:57] + "..."
    return repr(shown)


# What JSON Schema can say of printable text: no C0/C1 control characters, soft hyphen,
# bidi and zero-width format characters, line/paragraph separators or BOM. The model's
# check (str.isprintable) is stricter still: any format, separator or unassigned character.
_UNPRINTABLE = ("\\x00-\\x1f\\x7f-\\xa0\\xad\\u061c\\u180e\\u1680\\u2000-\\u200f\\u2028-\\u202f"
                "\\u205f-\\u206f\\u3000\\ufeff")
_PRINTABLE = re.compile(f"[^{_UNPRINTABLE}]{{0,{_TEXT_MAX}}}")


def _text(value: str) -> str:
    if len(value) > _TEXT_MAX or not value.isprintable() or not _PRINTABLE.fullmatch(value):
        raise ValueError("must be one line of at most 300 printable characters")
    return value


def _label_text(value: str) -> str:
    """A label value (``description`` is one too): rendered as ``"..."`` with ``\\``
    escaped, a value ending in a backslash ends in ``\\"``, which Docker reads right but
    hadolint's parser (language-docker) takes for an escaped quote and rejects the file."""
    if value.endswith("\\"):
        raise ValueError("must not end with a backslash (the Dockerfile label would end in "
                         "\\\\\", which hadolint rejects): remove the trailing backslash")
    return value


Name = Annotated[str, _shaped("name")]
CudaVersion = Annotated[str, _shaped("cuda_version")]
PythonVersion = Annotated[str, _shaped("python_version")]
PackageVersion = Annotated[str, _shaped("package_version")]
# Image references follow the distribution grammar (dockergen/refs.py), which also keeps
# them to [A-Za-z0-9._:/@[]-]: nothing that could end a Dockerfile instruction or a label.
REFERENCE_SHAPES: dict[str, tuple[dict[str, bool | None], str]] = {
    "image_ref": ({}, "an image reference like "
                      "\"registry.example.com/cuda:13.0.2-devel-ubuntu22.04@sha256:<64 hex>\""),
    "image_repo": ({"tag": False, "digest": False},
                   "an image repository like \"registry.example.com/llm/vllm\" (no tag)"),
}


def check_reference(kind: str, value: str) -> str:
    """``value`` as an image reference of ``kind`` (a key of REFERENCE_SHAPES), else
    ValueError naming the shape (the same message as every other field's shape)."""
    want, what = REFERENCE_SHAPES[kind]
    if not refs.is_reference(value, **want):
        raise ValueError(f"{_show(value)} is not {what}")
    return value


def _reference_form(kind: str) -> _Form:
    want = REFERENCE_SHAPES[kind][0]
    pattern = refs.schema_pattern(tag=want.get("tag") is not False,
                                  digest=want.get("digest") is not False)
    return _Form(lambda v: check_reference(kind, v), (("pattern", f"^(?:{pattern})$"),),
                 _EXAMPLES[kind])


ImageRef = Annotated[str, _reference_form("image_ref")]
ImageRepo = Annotated[str, _reference_form("image_repo")]
ModelPath = Annotated[str, _shaped("model")]
Host = Annotated[str, _shaped("host")]
def _extra_arg(value: str) -> str:
    """A flag, a plain value, or a JSON object/array value (``--speculative-config``).

    The server command is written in exec form (a JSON array), so a JSON value reaches the
    server as one argument, never through a shell; only its shape is checked here.
    """
    regex, what = PATTERNS["extra_arg"]
    if regex.fullmatch(value):
        return value
    flag, sep, rest = value.partition("=")
    text = rest if sep and regex.fullmatch(flag + "=") else value
    if text[:1] in "{[" and len(value) <= 2048 and value.isprintable():
        try:
            json.loads(text)
        except ValueError:
            pass
        else:
            return value
    raise ValueError(f"{_show(value)} is not {what}, or a JSON object or array "
                     "(e.g. '{\"method\": \"ngram\"}')")


# the schema's form of an extra argument: a flag or plain value, or a JSON object or array
# (as the whole value or after `--flag=`), which the model parses (JSON is no regex)
_EXTRA_ARG_JSON = ("^(?:" + PATTERNS["extra_arg"][0].pattern
                   + r"|(?:--[a-z0-9][a-z0-9_-]*=)?[\[{][^\x00-\x1f\x7f]{0,2046})$")
ExtraArg = Annotated[str, _Form(_extra_arg, (("pattern", _EXTRA_ARG_JSON),),
                                _EXAMPLES["extra_arg"])]
EnvName = Annotated[str, _shaped("env_name")]
EnvValue = Annotated[str, _shaped("env_value")]
LabelKey = Annotated[str, _shaped("label_key")]
TagTemplate = Annotated[str, _shaped("tag_template")]
Url = Annotated[str, _shaped("url")]
FilePath = Annotated[str, _shaped("file_path")]
HostPath = Annotated[str, _shaped("host_path")]
PipPin = Annotated[str, _shaped("pip_pin")]
AptName = Annotated[str, _shaped("apt_name")]
RefTemplate = Annotated[str, _shaped("ref_template")]
FieldPathText = Annotated[str, _shaped("field_path")]
Duration = Annotated[str, _shaped("duration")]
ScrapeTarget = Annotated[str, _shaped("scrape_target")]
Text = Annotated[str, _Form(_text, (("pattern", json_pattern(_PRINTABLE)),
                                   ("maxLength", _TEXT_MAX)), "one line of text")]
# a label value: printable text that does not end in a backslash (see _label_text)
_LABEL = re.compile(f"(?:[^{_UNPRINTABLE}]{{0,{_TEXT_MAX - 1}}}[^{_UNPRINTABLE}\\\\])?")
LabelText = Annotated[str, _Form(lambda v: _label_text(_text(v)),
                                 (("pattern", json_pattern(_LABEL)), ("maxLength", _TEXT_MAX)),
                                 "one line of text")]


def _mirror_url(value: str) -> str:
    """A python-build-standalone mirror: ``http(s)://host[:port]/path`` or ``file:///path``.

    The URL is written into the build stages' ENV (UV_PYTHON_INSTALL_MIRROR), which the build
    history and the build record keep, so credentials are refused, not redacted: a redacted
    URL could not be fetched, and a working one would leak. A query string is refused too
    (tokens travel there). The message never repeats the credential.
    """
    scheme, sep, rest = value.partition("://")
    authority = rest.split("/", 1)[0]
    if sep and "@" in authority:
        bare = f"{scheme}://{rest.split('@', 1)[1]}"
        raise ValueError("the URL carries credentials before the host (they would be stored "
                         "in the build stages' ENV and history), without them it is "
                         f"{_show(bare)}")
    if "?" in value or "#" in value:
        bare = value.split("?", 1)[0].split("#", 1)[0]
        raise ValueError("the URL carries a query or fragment (tokens travel there, and the "
                         "URL is stored in the build stages' ENV and history), without it it "
                         f"is {_show(bare)}")
    if PATTERNS["url"][0].fullmatch(value) or _MIRROR_FILE.fullmatch(value):
        return value
    raise ValueError(f"{_show(value)} is not an http(s) URL without credentials, query or "
                     "spaces, nor a file:///absolute/path")


_MIRROR_FILE = re.compile(r"file:///[A-Za-z0-9._~/-]*")
MirrorUrl = Annotated[str, _Form(_mirror_url, (("pattern", "^(?:" + PATTERNS["url"][0].pattern
                                                 + "|" + _MIRROR_FILE.pattern + ")$"),),
                                 "https://mirror.example.com/python-build-standalone")]


def _max_jobs(value: Any) -> int | str:
    if value == "auto":
        return "auto"
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 256:
        return value
    raise ValueError(f"expected \"auto\" or a whole number from 1 to 256, got {value!r}")


MaxJobs = Annotated[
    int | str,
    PlainValidator(_max_jobs),
    WithJsonSchema({"anyOf": [{"const": "auto"}, {"type": "integer", "minimum": 1,
                                                  "maximum": 256}]}),
]

def _axis_values(value: Any) -> tuple[Any, ...] | dict[str, Any]:
    if isinstance(value, (list, tuple)):
        return tuple(value)
    if isinstance(value, dict):
        regex, what = PATTERNS["name"]
        for key in value:
            if not isinstance(key, str) or not regex.fullmatch(key):
                raise ValueError(f"value name {key!r} is not {what}")
        return dict(value)
    raise ValueError("expected a list of values or a mapping NAME: VALUE")


AxisValues = Annotated[
    Any,
    PlainValidator(_axis_values),
    WithJsonSchema({"anyOf": [{"type": "array", "minItems": 1},
                              {"type": "object", "minProperties": 1}]}),
]

WeightQuant = Literal["auto", "fp16", "bf16", "fp8", "int8", "int4-awq", "gptq"]
KvQuant = Literal["auto", "fp8", "int8"]


# The defaults fit the headline release, vLLM 0.33.0 (torch 2.14.0, CUDA 13 wheels,
# Requires-Python >=3.10): a stand-alone profile that names only its GPUs, the engine
# release, the model and the image validates (profiles/h100-standalone.yaml).
HEADLINE_CUDA = "13.0.2"
HEADLINE_PYTHON = "3.12"


# An image platform (OCI OS/ARCH) -> the machine its wheels are built for (the wheel tag's
# and `uname -m`'s name: PEP 600 manylinux_X_Y_<machine>).
MACHINE_OF_PLATFORM = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Gpu(_Section):
    """Which GPUs the image must run on."""

    targets: tuple[str, ...] = Field(
        min_length=1,
        description="GPU names (a100, h100, l40s, b200, ...) or compute capabilities "
                    "(\"8.0\", \"9.0\"); list several for one image serving all of them.")


class Cuda(_Section):
    """The CUDA toolkit of the base images."""

    version: CudaVersion = Field(HEADLINE_CUDA, description="CUDA toolkit version; drives the "
                                 "nvidia/cuda tags.")
    os: Literal["ubuntu20.04", "ubuntu22.04", "ubuntu24.04"] = "ubuntu22.04"
    devel_image: ImageRef | None = Field(
        None, description="Explicit build image (a mirror, NGC, or an @sha256 pin); "
                          "replaces nvidia/cuda:<version>-devel-<os>.")
    runtime_image: ImageRef | None = Field(
        None, description="Explicit runtime image; replaces nvidia/cuda:<version>-<flavor>-<os>.")
    runtime_flavor: Literal["runtime", "base"] = Field(
        "base", description="nvidia/cuda flavour of the runtime stage. base: the CUDA "
                            "runtime (cudart) only; torch and the engines bring their CUDA "
                            "libraries as wheels (nvidia-*), so runtime's own cuBLAS, cuFFT, "
                            "NCCL, ... would be a second, unused set (vLLM's own Dockerfile "
                            "ends on base too).")


class Engine(_Section):
    """The inference engine and its release; torch and friends are derived from it."""

    name: EngineName
    version: PackageVersion
    torch: PackageVersion | None = Field(
        None, description="Override the torch pin derived from the engine release.")


class FlashAttnSource(_Section):
    """A pinned flash-attn source built instead of the PyPI sdist of ``version``.

    For fixes merged upstream but not released (e.g. Dao-AILab/flash-attention PR #2879/#2899:
    C++20 for torch >= 2.14): an sdist-like archive (with csrc/cutlass) at ``url`` checked
    against ``sha256``, or a git repository at ``commit`` (pip checks out the submodules).
    """

    url: Annotated[str, _shaped("url")] | None = None
    sha256: Annotated[str, _shaped("sha256")] | None = None
    git: Annotated[str, _shaped("url")] | None = None
    commit: Annotated[str, _shaped("git_commit")] | None = None
    cxx_std: Literal[17, 20, 23] | None = Field(
        None, description="The C++ standard this source's setup.py forces (-std=c++NN); "
        "checked against the torch headers. Unset: unknown until the build.")

    @model_validator(mode="after")
    def _one_kind(self) -> FlashAttnSource:
        archive = self.url is not None or self.sha256 is not None
        git = self.git is not None or self.commit is not None
        if archive == git:
            raise ValueError("give either url + sha256 (an archive) or git + commit")
        if archive and (self.url is None or self.sha256 is None):
            raise ValueError("an archive source needs both url and sha256")
        if git and (self.git is None or self.commit is None):
            raise ValueError("a git source needs both git and commit")
        return self


class FlashAttn(_Section):
    """FlashAttention-2, compiled from source for exactly the target GPUs."""

    # none: the headline vLLM release's attention uses its bundled kernels, and every
    # released flash-attn forces C++17, which its torch (2.14) refuses (rule fa2-cxx-std)
    build: Literal["source", "none"] = "none"
    version: PackageVersion = "2.8.3.post2"
    source: FlashAttnSource | None = None
    max_jobs: MaxJobs = Field("auto", description="ninja jobs; auto = build.memory_gib / 9 GiB.")
    nvcc_threads: int = Field(4, ge=1, le=32)
    purpose: Text | None = Field(
        None, description="What in the image uses this FlashAttention-2 build (e.g. "
        "transformers attn_implementation=flash_attention_2). Engines with their own "
        "attention kernels (vLLM, SGLang) warn about an unexplained build; a purpose "
        "answers that warning and is shown by explain.")


class Quantization(_Section):
    """Weight and KV-cache precision."""

    weights: WeightQuant = "auto"
    kv_cache: KvQuant = "auto"


class Serving(_Section):
    """How the OpenAI-compatible server is started (ENTRYPOINT/CMD of the image)."""

    model: ModelPath = Field(description="Model directory in the image/volume, or a HF id.")
    served_model_name: ModelPath | None = None
    host: Host = "0.0.0.0"
    port: int = Field(8000, ge=1, le=65535)
    max_model_len: int | None = Field(None, ge=1, le=_INT32_MAX)
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    max_num_batched_tokens: int | None = Field(None, ge=1, le=_INT32_MAX)
    max_num_seqs: int | None = Field(None, ge=1, le=_INT32_MAX)
    enable_chunked_prefill: bool | None = None
    tensor_parallel_size: int = Field(1, ge=1, le=64)
    extra_args: tuple[ExtraArg, ...] = Field(
        (), description="Extra server arguments, appended after the derived ones.")
    env: dict[EnvName, EnvValue] = Field(
        default_factory=dict, description="Non-secret runtime environment (never tokens).")
    health_start_period_s: int = Field(600, ge=0, le=7200,
                                       description="HEALTHCHECK --start-period (model load).")
    hf_config: FilePath | None = Field(
        None, description="The model's Hugging Face config.json (relative to the profile "
                          "file) or a built-in model name (dockergen plan); validate then "
                          "checks that max_model_len fits. For an engine that JIT-builds "
                          "kernels at start-up (SGLang), the image's JIT cache is seeded "
                          "for this model's dtype and RoPE shape; unset, its first start on "
                          "each node compiles them.")


class Image(_Section):
    """Name, tags and extra labels of the built image."""

    name: ImageRepo
    tags: tuple[TagTemplate, ...] = ("{engine.version}-cu{cuda.major_minor}-{name}",)
    labels: dict[LabelKey, LabelText] = Field(default_factory=dict)
    cache_ref: RefTemplate | None = Field(
        None, description="Registry build-cache ref of the bake target (cache-from/cache-to, "
                          "mode=max); placeholders as in tags. Default: "
                          "<image.name>:buildcache-{name}. One ref per target.")
    attest: tuple[Literal["provenance", "sbom"], ...] = Field(
        (), description="Build attestations the bake target asks for (opt-in): provenance "
                        "(mode=max) and/or sbom.")
    compression: Literal["zstd", "gzip"] = Field(
        "zstd", description="Layer compression of the pushed image. zstd (default): nodes "
                            "decompress it about 6x faster (vLLM's venv: 8.4 s vs 52.6 s) and "
                            "need containerd >= 1.5 or Docker Engine >= 23; building it needs "
                            "BuildKit with the containerd image store. gzip: any node and any "
                            "engine.")


class Build(_Section):
    """The build host and the package sources of the build stages."""

    memory_gib: int = Field(64, ge=4, le=4096,
                            description="Build host memory; sizes MAX_JOBS of CUDA compiles.")
    platform: Literal["linux/amd64", "linux/arm64"] = Field(
        "linux/amd64",
        description="The machine the image runs on: its wheels, the compiled kernels the "
                    "checks read and the GPUs it may target are that machine's (GH200, "
                    "GB200 and GB10 exist only as linux/arm64 hosts).")
    ca_certificates: tuple[HostPath, ...] = Field(
        (), description="Extra CA certificate files (PEM) for TLS-intercepting proxies; "
                        "installed in build stages only. Relative to the profile.")
    python_from: Literal["uv", "image"] = Field(
        "uv", description="uv: a relocatable CPython installed by uv; image: the base "
                          "image's own python3 (must be the profile's version).")
    python_mirror: MirrorUrl | None = Field(
        None, description="Mirror of python-build-standalone for build.python_from: uv "
                          "(uv's UV_PYTHON_INSTALL_MIRROR): uv fetches "
                          "MIRROR/RELEASE/ARCHIVE instead of its built-in download URL and "
                          "still checks the sha256 built into uv. http(s) (no credentials) "
                          "or file:///path inside the build stage: dockergen copies "
                          "nothing from the host, so the archives must already be in "
                          "cuda.devel_image.")
    pip_index_url: Url | None = Field(None, description="PyPI mirror (no credentials).")
    torch_index_url: Url = Field(
        "https://download.pytorch.org/whl",
        description="Root of PyTorch's own download index (or a mirror of it); dockergen "
                    "appends the CUDA-matched folder (/cu130). Used with torch_from: "
                    "pytorch-index.")
    torch_from: Literal["pytorch-index", "main-index"] = Field(
        "pytorch-index",
        description="Where torch comes from. pytorch-index: torch_index_url's CUDA-matched "
                    "folder. main-index: the main index (build.pip_index_url or PyPI), for "
                    "shops that mirror only PyPI; allowed only where PyPI's wheel of the "
                    "engine's torch release is built for the profile's CUDA major (its "
                    "cuda-toolkit / nvidia-*-cuNN dependencies, torch.yaml pypi_cuda_major).")
    engine_index_url: Url | None = Field(
        None, description="Replaces the engine's own extra index (TensorRT-LLM: "
                          "https://pypi.nvidia.com), e.g. with a mirror.")
    flashinfer_index_url: Url | None = Field(
        None, description="Index with FlashInfer's precompiled kernels (flashinfer-cubin) "
                          "for vLLM releases that leave them out and whose version PyPI lacks "
                          "(vLLM >= 0.27.1: https://flashinfer.ai/whl, or a mirror). Unset: "
                          "those images carry no precompiled kernels (explain says so).")
    flashinfer_aot: bool = Field(
        True, description="Build the FlashInfer kernels the engine release runs at start-up "
                          "(e.g. vLLM 0.33.0's sampler) for gpu.targets in the build, with "
                          "CUDA's compiler wheels from the index (no GPU needed). false: none "
                          "are built and the engine JIT-compiles them at its first start, "
                          "which needs nvcc on the node (runtime.jit_toolchain).")


class Packages(_Section):
    """Extra packages: pip pins installed with the engine (keeping its torch pin, checked
    against the pins dockergen derives) and apt packages of the runtime image."""

    pip: tuple[PipPin, ...] = Field((), description="Exact pins NAME==VERSION, installed in the "
                                                    "engine stage together with the engine.")
    apt: tuple[AptName, ...] = Field((), description="Packages of the runtime image (no "
                                                     "compilers unless runtime.jit_toolchain).")


class Runtime(_Section):
    """The runtime stage."""

    uid: int = Field(10001, ge=1, le=2_000_000_000, description="Numeric non-root user.")
    jit_toolchain: bool = Field(
        False, description="Keep nvcc and gcc in the runtime image for JIT kernels.")


def _regex(value: str) -> str:
    # compiled here so that `validate` reports it, not the smoke test after a long build
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"{_show(value)} is not a valid regular expression: {exc}") from None
    return value


Regex = Annotated[Text, _Form(_regex, (("format", "regex"),), "^vllm [0-9.]+$")]


class CommandTest(_Section):
    """A command run in the built image (exec form; the entrypoint is bypassed)."""

    name: Text
    command: tuple[Text, ...] = Field(min_length=1)
    exit_code: int = 0
    expected_output: tuple[Regex, ...] = Field((), description="Regexes the output must match.")
    excluded_output: tuple[Regex, ...] = Field((), description="Regexes it must not match.")


class FileTest(_Section):
    """A path that must (or must not) exist in the built image."""

    path: FilePath
    should_exist: bool = True


class Smoke(_Section):
    """Smoke tests run on the built image before anything is pushed."""

    defaults: bool = Field(True, description="Run the built-in checks (versions, arch audit, "
                                             "user, labels, no compilers, no secrets).")
    commands: tuple[CommandTest, ...] = ()
    files: tuple[FileTest, ...] = ()
    timeout_s: int = Field(300, ge=5, le=3600)

    @model_validator(mode="after")
    def _some_check(self) -> Smoke:
        # Zero checks is not a pass: `--push` would publish an image nothing has looked at.
        if not (self.defaults or self.commands or self.files):
            raise ValueError("no smoke checks at all (defaults off, no commands, no files); "
                             "an image would be pushed that nothing has checked")
        return self


class Matrix(_Section):
    """Axes expanded into one variant per point (``render --all``, ``validate``)."""

    axes: dict[FieldPathText, AxisValues] = Field(
        min_length=1,
        description="Field path -> values: a list (variant names use the values) or a "
                    "mapping name -> value (variant names use the names). Points are the "
                    "cartesian product in the order written.")
    exclude: tuple[dict[FieldPathText, Any], ...] = Field(
        (), description="Points to leave out: each entry matches points whose axes have "
                        "all the given values (a value or its name).")


class Observe(_Section):
    """Monitoring written by ``dockergen observe``: scrape targets, alert budgets, timings."""

    job: Name | None = Field(
        None, description="Prometheus job name of the server; default dockergen-<name>.")
    targets: tuple[ScrapeTarget, ...] = Field(
        (), description="host:port of each server replica; default localhost:<serving.port>.")
    scrape_interval: Duration = "15s"
    rate_window: Duration = Field(
        "5m", description="Window of rate() and histogram quantiles in the recording rules; "
                          "at least 4x scrape_interval.")
    e2e_p99_budget_s: float = Field(
        30.0, gt=0, le=86400,
        description="Alert when P99 end-to-end request latency stays above this (seconds).")
    kv_cache_usage_threshold: float = Field(
        0.95, gt=0, le=1,
        description="Alert when KV-cache usage (0..1) stays above this while requests wait.")
    latency_for: Duration = Field("10m", description="for: of the latency alert.")
    kv_cache_for: Duration = Field("5m", description="for: of the KV-cache alert.")
    down_for: Duration = Field("2m", description="for: of the server-down alerts.")
    stalled_for: Duration = Field("5m", description="for: of the no-tokens-generated alert.")
    runbook_url: Url | None = Field(
        None, description="Base URL of your runbook; each alert links <url>#<alert name>.")


class Profile(_Section):
    """A deployment profile: what to deploy; everything derivable is derived."""

    extends: str | None = Field(
        None, description="Profile to inherit from: a shipped profile name or a file "
                          "next to this one (without .yaml).")
    abstract: bool = Field(
        False, description="Only provides defaults for profiles that extend it; "
                           "never rendered itself. Not inherited.")
    knowledge: tuple[HostPath, ...] = Field(
        (), description="User knowledge files (relative to the profile) adding releases to "
                        "dockergen's facts, e.g. a vLLM release it does not know yet; each "
                        "added fact needs its src and is shown as the user's in explain.")
    name: Name
    description: LabelText = ""
    gpu: Gpu
    cuda: Cuda = Cuda()
    python: PythonVersion = HEADLINE_PYTHON
    engine: Engine
    flash_attn: FlashAttn = FlashAttn()
    quantization: Quantization = Quantization()
    serving: Serving
    image: Image
    build: Build = Build()
    packages: Packages = Packages()
    runtime: Runtime = Runtime()
    smoke: Smoke = Smoke()
    matrix: Matrix | None = Field(
        None, description="Expand this profile into variants, one per point of the axes "
                          "(each named <name>-<value>-...); see `dockergen validate`.")
    observe: Observe = Observe()

