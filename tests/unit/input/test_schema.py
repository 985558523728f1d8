"""The generated JSON Schema accepts every real profile and rejects broken ones.

Checked with a real JSON Schema validator (the `jsonschema` package, draft 2020-12), on
the committed schema file that editors load through the yaml-language-server line of
docs/profiles.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dockergen.input.yamlsource import parse_yaml, read_yaml_file
from tests.conftest import EXAMPLES, PROFILES, ROOT
from tests.support.bad_profile_cases import VALID

SCHEMA_FILE = EXAMPLES / "profile.schema.json"
EVERY_PROFILE = sorted(PROFILES.glob("*.yaml")) + sorted((ROOT / "tests" / "profiles").glob(
    "*.yaml"))


def _plain(value: Any) -> Any:
    """dockergen's YAML 1.2 reading (what the tool itself sees) as JSON-like data."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA_FILE.read_text())
    cls = jsonschema.validators.validator_for(schema)
    assert cls is jsonschema.Draft202012Validator
    cls.check_schema(schema)
    return cls(schema)


def _errors(validator: jsonschema.protocols.Validator, text: str) -> list[str]:
    data, _ = parse_yaml(text, "p.yaml")
    return sorted(e.message for e in validator.iter_errors(_plain(data)))


def test_there_are_profiles_to_check() -> None:
    assert len(EVERY_PROFILE) >= 8
    assert any(p.name == "base.yaml" for p in EVERY_PROFILE)


@pytest.mark.parametrize("path", EVERY_PROFILE, ids=[p.name for p in EVERY_PROFILE])
def test_every_shipped_and_test_profile_is_valid(path: Path,
                                                 validator: jsonschema.protocols.Validator
                                                 ) -> None:
    """Before the fix: every profile using `extends:` was flagged for missing cuda/python/..."""
    data, _ = read_yaml_file(path, path.name)
    assert [e.message for e in validator.iter_errors(_plain(data))] == []


def test_the_documented_profile_is_valid(validator: jsonschema.protocols.Validator) -> None:
    page = (ROOT / "docs" / "profiles.md").read_text()
    block = re.search(r"```yaml\n(extends: base.*?)```", page, re.S)
    assert block is not None
    assert _errors(validator, block.group(1)) == []


def test_a_standalone_profile_is_valid(validator: jsonschema.protocols.Validator) -> None:
    assert _errors(validator, VALID) == []


def test_a_standalone_profile_must_be_complete(
        validator: jsonschema.protocols.Validator) -> None:
    text = VALID.replace("image:\n  name: registry.example.com/llm/vllm\n", "")
    assert _errors(validator, text) == ["'image' is a required property"]
    text = VALID.replace("  model: /models/m\n", "")
    assert _errors(validator, text) == ["'model' is a required property"]


def test_an_extending_profile_is_still_checked(
        validator: jsonschema.protocols.Validator) -> None:
    assert _errors(validator, "extends: base\nname: x\nserving: {prot: 80}\n") == [
        "Additional properties are not allowed ('prot' was unexpected)"]
    assert _errors(validator, 'extends: base\nname: x\npython: 3.10\n') == [
        "3.1 is not of type 'string'"]
    assert _errors(validator, "extends: base\nname: x\nengine: {name: vlm}\n") == [
        "'vlm' is not one of ['vllm', 'tensorrt-llm', 'sglang']"]


def test_list_items_stay_complete_in_an_extending_profile(
        validator: jsonschema.protocols.Validator) -> None:
    """Lists replace the parent's whole, so each smoke command needs its own fields."""
    text = "extends: base\nname: x\nsmoke:\n  commands:\n    - name: no command\n"
    assert _errors(validator, text) == ["'command' is a required property"]


def test_abstract_false_does_not_relax(validator: jsonschema.protocols.Validator) -> None:
    assert "'gpu' is a required property" in _errors(validator, "abstract: false\nname: x\n")
