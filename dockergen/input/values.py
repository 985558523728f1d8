"""The shapes of a profile's values: each text field's narrow form (checked by the model,
the same form in the JSON Schema, an example for a fix), and the base of every section.

Every string that can reach the Dockerfile is checked against a narrow pattern: nothing
outside them may pass (no quotes, spaces, newlines, `$`, backslashes or `;`).
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
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PlainValidator,
    WithJsonSchema,
)
from pydantic_core import core_schema

from dockergen import refs
from dockergen.engine_names import FOLDERS
from dockergen.errors import shown_value

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
INT32_MAX = 2**31 - 1
# a TCP port, 1-65535
_PORT = r"(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
# (pattern, what it accepts in words) by shape name, compiled once into PATTERNS; the
# command line checks its own values (an index URL, a scrape target) by the same shapes
_SHAPES: dict[str, tuple[str, str]] = {
    "name": (r"[a-z0-9][a-z0-9-]{0,62}",
             "lowercase letters, digits and '-', starting with a letter or digit"),
    "cuda_version": (r"\d{1,2}\.\d{1,2}\.\d{1,2}", "a CUDA version like \"13.0.2\""),
    "python_version": (r"3\.\d{1,2}", "a Python version like \"3.12\""),
    "package_version": (r"\d+(\.\d+){0,3}((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?",
                        "a release version like \"0.33.0\""),
    "model": (r"[A-Za-z0-9_/][A-Za-z0-9._/@+-]{0,255}",
              "an absolute path in the image or a Hugging Face id like \"org/model\""),
    "host": (r"(\d{1,3}(\.\d{1,3}){3}|::|\[?[0-9a-fA-F:]+\]?|localhost)",
             "an IP address like \"0.0.0.0\""),
    "extra_arg": (r"--[a-z0-9][a-z0-9_-]*(=[A-Za-z0-9._/:,@+-]*)?"
                  r"|[A-Za-z0-9._/:,@+-]+",
                  "a flag like \"--enforce-eager\" or \"--seed=0\", or a plain value"),
    "env_name": (r"[A-Z_][A-Z0-9_]{0,127}",
                 "an environment variable name like VLLM_LOGGING_LEVEL"),
    "env_value": (r"[A-Za-z0-9._/:,@+=-]{0,512}",
                  "letters, digits and ._/:,@+=- only"),
    "label_key": (r"[a-z0-9]+([.-][a-z0-9]+)*",
                  "a reverse-DNS label key like com.example.team"),
    "tag_template": (r"[A-Za-z0-9_{}.-]{1,128}",
                     "a tag like \"{engine.version}-cu{cuda.major_minor}\""),
    "url": (r"https?://[A-Za-z0-9.-]+(:\d{1,5})?(/[A-Za-z0-9._~/-]*)?",
            "an http(s) URL without credentials, query or spaces"),
    "sha256": (r"[0-9a-f]{64}", "a sha256 digest: 64 lowercase hex digits"),
    "git_commit": (r"[0-9a-f]{40}|[0-9a-f]{64}",
                   "a full git commit id: 40 (or 64) lowercase hex digits"),
    "file_path": (r"[A-Za-z0-9._/-]{1,255}", "a relative or absolute file path"),
    "pip_pin": (r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,99})(?:\[[A-Za-z0-9,._-]{1,100}\])?"
                r"==\d+(\.\d+){0,3}((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?",
                "an exact pin like \"transformers==4.57.1\" (NAME==VERSION)"),
    "apt_name": (r"[a-z0-9][a-z0-9+.-]{1,62}", "a Debian/Ubuntu package name"),
    # a file on the build host, read by dockergen and never written into the Dockerfile
    # (certificates are copied as certs/extra-N.crt), so any printable path is safe
    "host_path": (r"[^\x00-\x1f\x7f]{1,4096}",
                  "a file path without control characters"),
    # An image reference whose tag may hold tag-template placeholders (image.cache_ref);
    # the expanded result is checked by the reference grammar (dockergen/outputs/fleet/bake.py).
    "ref_template": (r"[a-z0-9{][A-Za-z0-9._/:{}-]{0,254}",
                     "an image reference like \"registry.example.com/cache/vllm:{name}\""),
    "field_path": (r"[a-z_]+(\.[a-z_]+){0,3}",
                   "a dotted profile field like quantization.weights"),
    "duration": (r"[1-9][0-9]{0,4}(ms|s|m|h)",
                 "a Prometheus duration like \"30s\", \"5m\" or \"1h\""),
    "scrape_target": (r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}:" + _PORT,
                      "a host:port scrape target (port 1-65535) like "
                      "\"vllm-0.example.internal:8000\""),
}
PATTERNS: dict[str, tuple[re.Pattern[str], str]] = {
    name: (re.compile(pattern), words) for name, (pattern, words) in _SHAPES.items()}

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
class Form:
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


def shaped(kind: str) -> Form:
    """The form of a text field of the shape ``kind`` (a key of :data:`PATTERNS`)."""
    regex, what = PATTERNS[kind]

    def check(value: str) -> str:
        if not regex.fullmatch(value):
            raise ValueError(f"{shown_value(value)} is not {what}")
        return value

    return Form(check, (("pattern", json_pattern(regex)),), _EXAMPLES[kind])


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


Name = Annotated[str, shaped("name")]
CudaVersion = Annotated[str, shaped("cuda_version")]
PythonVersion = Annotated[str, shaped("python_version")]
PackageVersion = Annotated[str, shaped("package_version")]
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
        raise ValueError(f"{shown_value(value)} is not {what}")
    return value


def _reference_form(kind: str) -> Form:
    want = REFERENCE_SHAPES[kind][0]
    pattern = refs.schema_pattern(tag=want.get("tag") is not False,
                                  digest=want.get("digest") is not False)
    return Form(lambda v: check_reference(kind, v), (("pattern", f"^(?:{pattern})$"),),
                 _EXAMPLES[kind])


ImageRef = Annotated[str, _reference_form("image_ref")]
ImageRepo = Annotated[str, _reference_form("image_repo")]
ModelPath = Annotated[str, shaped("model")]
Host = Annotated[str, shaped("host")]
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
    raise ValueError(f"{shown_value(value)} is not {what}, or a JSON object or array "
                     "(e.g. '{\"method\": \"ngram\"}')")


# the schema's form of an extra argument: a flag or plain value, or a JSON object or array
# (as the whole value or after `--flag=`), which the model parses (JSON is no regex)
_EXTRA_ARG_JSON = ("^(?:" + PATTERNS["extra_arg"][0].pattern
                   + r"|(?:--[a-z0-9][a-z0-9_-]*=)?[\[{][^\x00-\x1f\x7f]{0,2046})$")
ExtraArg = Annotated[str, Form(_extra_arg, (("pattern", _EXTRA_ARG_JSON),),
                                _EXAMPLES["extra_arg"])]
EnvName = Annotated[str, shaped("env_name")]
EnvValue = Annotated[str, shaped("env_value")]
LabelKey = Annotated[str, shaped("label_key")]
TagTemplate = Annotated[str, shaped("tag_template")]
Url = Annotated[str, shaped("url")]
FilePath = Annotated[str, shaped("file_path")]
HostPath = Annotated[str, shaped("host_path")]
PipPin = Annotated[str, shaped("pip_pin")]
AptName = Annotated[str, shaped("apt_name")]
RefTemplate = Annotated[str, shaped("ref_template")]
FieldPathText = Annotated[str, shaped("field_path")]
Duration = Annotated[str, shaped("duration")]
ScrapeTarget = Annotated[str, shaped("scrape_target")]
Text = Annotated[str, Form(_text, (("pattern", json_pattern(_PRINTABLE)),
                                   ("maxLength", _TEXT_MAX)), "one line of text")]
# a label value: printable text that does not end in a backslash (see _label_text)
_LABEL = re.compile(f"(?:[^{_UNPRINTABLE}]{{0,{_TEXT_MAX - 1}}}[^{_UNPRINTABLE}\\\\])?")
LabelText = Annotated[str, Form(lambda v: _label_text(_text(v)),
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
                         f"{shown_value(bare)}")
    if "?" in value or "#" in value:
        bare = value.split("?", 1)[0].split("#", 1)[0]
        raise ValueError("the URL carries a query or fragment (tokens travel there, and the "
                         "URL is stored in the build stages' ENV and history), without it it "
                         f"is {shown_value(bare)}")
    if PATTERNS["url"][0].fullmatch(value) or _MIRROR_FILE.fullmatch(value):
        return value
    raise ValueError(f"{shown_value(value)} is not an http(s) URL without credentials, query or "
                     "spaces, nor a file:///absolute/path")


_MIRROR_FILE = re.compile(r"file:///[A-Za-z0-9._~/-]*")
MirrorUrl = Annotated[str, Form(_mirror_url, (("pattern", "^(?:" + PATTERNS["url"][0].pattern
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


class Section(BaseModel):
    """A section of the profile: closed (unknown keys are errors), strictly typed, frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
