"""The no-secrets check, run on the raw profile data before the model validates it.

Running before validation means a type error elsewhere never hides a credential (a user's report:
"type errors hide the secret checks until they are fixed"), and scanning every string of
the profile covers fields that reach the image without being listed here one by one
(``description`` becomes a label; smoke commands end up in logs). The components hold no
secret checks of their own: a profile with a credential never reaches them.
"""

from __future__ import annotations

import re
from typing import Any

from dockergen.errors import SECRET_NAME, SECRET_VALUE, Problem, dotted
from dockergen.input.yamlsource import FieldPath, Positions

_SECRET_FLAG = re.compile(r"--(api-key|hf-token|token)\b")
_IMAGE = "would be readable by anyone who pulls the image"
# where each serving engine takes its API key at run time (src: vLLM reads VLLM_API_KEY,
# VLLM-WHEEL 0.33.0 envs.py; the others take it as an option or a mounted secret)
_SERVER_SECRET_HINT = {
    "vllm": "pass it at run time (e.g. the VLLM_API_KEY environment variable)",
    "": "pass it at run time (an environment variable or a mounted secret)"}


def scan(data: dict[str, Any], pos: Positions) -> list[Problem]:
    """Every credential-like name or value in the merged profile data, as problems."""
    problems: list[Problem] = []
    engine = data.get("engine")
    name = engine.get("name") if isinstance(engine, dict) else None
    server_hint = _SERVER_SECRET_HINT.get(str(name), _SERVER_SECRET_HINT[""])

    def add(path: FieldPath, message: str, fix: str) -> None:
        problems.append(Problem(pos.of(path), dotted(path), message, fix))

    def walk(value: Any, path: FieldPath) -> None:
        if isinstance(value, dict):
            for key, child in value.items():
                walk(child, (*path, str(key)))
            return
        if isinstance(value, (list, tuple)):
            for i, child in enumerate(value):
                walk(child, (*path, i))
            return
        if path[:2] == ("serving", "env") and len(path) == 3:
            name = str(path[2])
            fix = f"pass it when the container starts (docker run -e {name}) instead"
            if SECRET_NAME.search(name):
                add(path, f"{name} looks like a secret and {_IMAGE}", fix)
            elif SECRET_VALUE.search(str(value)):
                add(path, f"the value looks like a credential and {_IMAGE}", fix)
            return
        if not isinstance(value, str):
            return
        if path[:2] == ("serving", "extra_args"):
            if SECRET_VALUE.search(value) or _SECRET_FLAG.match(value):
                add(path, f"a credential in the server arguments {_IMAGE}", server_hint)
        elif path[:2] == ("image", "labels") or path == ("description",):
            if SECRET_VALUE.search(value):
                add(path, f"the value looks like a credential and {_IMAGE} (it becomes a "
                          "label)", "never put credentials in labels or the description")
        elif SECRET_VALUE.search(value):
            add(path, "the value looks like a credential; profiles are copied into images, "
                      "logs and build records", "pass credentials at run time, never in a "
                                                "profile")

    walk(data, ())
    return problems
