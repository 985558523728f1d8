"""`dockergen deploy` on bad input: a clear error and its exit code, nothing written.

Option values and build records end up in the YAML written (and in its header comments):
values of the wrong form are refused before anything is read (exit 64 for options, 2 for
a record), credentials are never echoed, and a failed write leaves the output as it was
(exit 4). No engine or external tool is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dockergen.files.owned import MANIFEST
from tests.conftest import PROFILES, Run, run_cli, shipped_names
from tests.support.records import DIGEST, write_record

PROFILE = str(PROFILES / "h100-fp8.yaml")
TOKEN = "hf_" + "Q7" * 15
PASSWORD = "s3cretPW"


def _deploy(fmt: str, *args: str) -> Run:
    return run_cli("deploy", PROFILE, "--format", fmt, "-q", *args)


def _refused(run: Run, rc: int, *words: str) -> None:
    assert run.rc == rc, (run.rc, run.err)
    assert "Traceback" not in run.err
    for word in words:
        assert word in run.err, run.err


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(folder.rglob("*"))}


def _record(tmp: Path, **fields: Any) -> Path:
    return write_record(tmp, **fields)


INJECTED = "a\nevil: injected"


@pytest.mark.parametrize(("fmt", "option", "value", "rule"), [
    ("k8s", "--model-claim", INJECTED, "DNS subdomain name"),
    ("k8s", "--namespace", INJECTED, "RFC 1123 label"),
    ("k8s", "--namespace", "a.b", "RFC 1123 label"),  # a label has no dots
    ("k8s", "--hf-secret", INJECTED, "DNS subdomain name"),
    ("k8s", "--runtime-class", INJECTED, "DNS subdomain name"),
    ("k8s", "--runtime-class", "Nvidia", "DNS subdomain name"),
    ("compose", "--bind", "127.0.0.1\nevil: injected", "not an IP address"),
    ("compose", "--bind", "fe80::1%eth0\nevil: injected", "not an IP address"),
    ("compose", "--bind", "localhost", "not an IP address"),
    ("compose", "--gpu-ids", "0\nevil: injected", "not a GPU index"),
    ("compose", "--gpu-ids", "0,,1", "an empty id"),
    ("compose", "--gpu-ids", "0,", "an empty id"),
    ("compose", "--gpu-ids", "GPU-a", "not a GPU index"),
    ("compose", "--gpu-ids", "-1", "not a GPU index"),
    ("compose", "--gpu-ids", "0,0", "listed twice"),
])
def test_an_option_of_the_wrong_form_is_a_usage_error(tmp_path: Path, fmt: str, option: str,
                                                       value: str, rule: str) -> None:
    """The value never reaches the YAML (nor its comments): exit 64, nothing written."""
    out = tmp_path / "out.yaml"
    run = _deploy(fmt, option, value, "-o", str(out))
    _refused(run, 64, option, rule, " e.g. ")
    assert "\nevil: injected" not in run.err  # shown escaped, on one line
    assert not out.exists()


def test_the_fixes_the_errors_suggest_are_accepted(tmp_path: Path) -> None:
    """Every 'e.g.' value of the messages above is itself valid."""
    k8s = _deploy("k8s", "--namespace", "llm-serving", "--hf-secret", "hf-token",
                  "--model-claim", "llama-3-8b-model", "--runtime-class", "nvidia")
    assert k8s.rc == 0, k8s.err
    spec = [d for d in yaml.safe_load_all(k8s.out) if d][0]["spec"]["template"]["spec"]
    assert spec["runtimeClassName"] == "nvidia"
    for ids in ("0", "GPU-6f2a7c3e-0b1d-4e5f-8a9b-0c1d2e3f4a5b",
                "MIG-6f2a7c3e-0b1d-4e5f-8a9b-0c1d2e3f4a5b",
                "MIG-GPU-6f2a7c3e-0b1d-4e5f-8a9b-0c1d2e3f4a5b/1/0"):
        compose = _deploy("compose", "--gpu-ids", ids, "--bind", "0.0.0.0")
        assert compose.rc == 0, compose.err
    assert _deploy("compose", "--bind", "::1").rc == 0


@pytest.mark.parametrize(("option", "value"), [
    ("--hf-secret", TOKEN),
    ("--hf-secret", "sk-proj-" + "a1" * 20),
    ("--namespace", TOKEN),
    ("--model-claim", f"https://user:{PASSWORD}@example.com/"),
])
def test_a_token_given_for_a_name_is_refused_without_echoing_it(option: str, value: str
                                                                 ) -> None:
    run = _deploy("k8s", option, value)
    _refused(run, 64, option, "looks like a credential (not shown)")
    assert value not in run.err + run.out
    assert PASSWORD not in run.err
    if option == "--hf-secret":  # the user is told what to give instead
        assert "--hf-secret hf-token" in run.err and "kubectl create secret" in run.err


def test_header_comments_hold_no_raw_line_breaks() -> None:
    """The comment writer escapes what it is given, whatever checked it before."""
    from dockergen.outputs.deploy import comment

    assert "\n" not in comment(INJECTED) and "\u2028" not in comment("a\u2028b")
    assert comment("llm-serving") == "llm-serving"


@pytest.mark.parametrize(("fmt", "option", "value", "owner"), [
    ("compose", "--runtime-class", "nvidia", "k8s"),
    ("compose", "--namespace", "llm-serving", "k8s"),  # the default, typed: still refused
    ("compose", "--hf-secret", "hf-token", "k8s"),
    ("compose", "--model-claim", "models", "k8s"),
    ("compose", "--cpus", "4", "k8s"),
    ("compose", "--memory-gib", "32", "k8s"),
    ("k8s", "--gpu-ids", "0", "compose"),
    ("k8s", "--bind", "127.0.0.1", "compose"),
])
def test_an_option_of_the_other_format_is_a_usage_error(fmt: str, option: str, value: str,
                                                        owner: str) -> None:
    run = _deploy(fmt, option, value)
    _refused(run, 64, f"{option} applies to --format {owner} only")
    assert run.out == ""


def test_options_left_at_their_defaults_are_not_counted_as_given() -> None:
    for fmt in ("compose", "k8s"):
        run = _deploy(fmt)
        assert run.rc == 0 and "Traceback" not in run.err, run.err


def test_all_refuses_a_folder_it_did_not_write(tmp_path: Path) -> None:
    """A folder of the user's files is left exactly as it was, with exit 4."""
    blocked = tmp_path / "blocked"
    (blocked / "l40s-awq" / "k8s.yaml").mkdir(parents=True)  # a write that fails late
    as_file = tmp_path / "as-file"
    as_file.mkdir()
    (as_file / "l40s-awq").write_text("x\n")
    mine = tmp_path / "mine"
    (mine / "h100-fp8").mkdir(parents=True)
    (mine / "h100-fp8" / "k8s.yaml").write_text("kind: Mine\n")  # not generated
    for folder in (blocked, as_file, mine):
        before = _tree(folder)
        run = run_cli("deploy", "-q", "--all", "--format", "k8s", "-o", str(folder))
        _refused(run, 4, "was not written by dockergen")
        assert _tree(folder) == before
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_all_replaces_its_own_folder_and_keeps_the_other_format(tmp_path: Path) -> None:
    out = tmp_path / "deploy"
    for fmt in ("k8s", "compose", "k8s"):
        run = run_cli("deploy", "-q", "--all", "--format", fmt, "-o", str(out))
        assert run.rc == 0, run.err
    assert sorted(p.name for p in out.iterdir()) == sorted([*shipped_names(), MANIFEST])
    for name in shipped_names():
        assert sorted(p.name for p in (out / name).iterdir()) == ["compose.yaml", "k8s.yaml"]
    (out / "notes.txt").write_text("mine\n")  # no longer only dockergen's
    before = _tree(out)
    run = run_cli("deploy", "-q", "--all", "--format", "compose", "-o", str(out))
    _refused(run, 4, "holds files dockergen did not write (notes.txt)")
    assert _tree(out) == before


def test_output_inside_a_file_is_exit_4_and_nothing_is_written(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("hi\n")
    for args in (["h100-fp8"], ["--all"]):
        run = run_cli("deploy", *args, "--format", "compose", "-q",
                      "-o", str(afile / ("sub.yaml" if args != ["--all"] else "sub")))
        _refused(run, 4, "afile: is a file, not a folder")
        assert afile.read_text() == "hi\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
    folder = tmp_path / "folder"
    folder.mkdir()
    run = _deploy("compose", "-o", str(folder))
    _refused(run, 4, "is a folder")
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize(("fields", "key", "words"), [
    ({"pushed": {f"user:{PASSWORD}@registry.example.com/llm/vllm:x": DIGEST}},
     "pushed (entry 1)", "holds credentials (not shown)"),
    ({"pushed": {f"https://user:{PASSWORD}@registry.example.com/llm/vllm:x": DIGEST}},
     "pushed (entry 1)", "holds credentials (not shown)"),
    ({"pushed": {"registry.example.com/llm/vllm:x\nevil: injected": DIGEST}},
     "pushed (entry 1)", "is not an image reference"),
    ({"pushed": {"registry.example.com/llm/vllm:x": "sha256:" + "zz" * 32}},
     "pushed", "not sha256:<64 hex>"),
    ({"pushed": ["registry.example.com/llm/vllm:x"]}, "pushed", "not a mapping"),
    ({"immutable_tag": 123}, "immutable_tag", "(int) is not an image reference"),
    ({"immutable_tag": "registry.example.com/llm/vllm:dg-1\nevil: injected"},
     "immutable_tag", "is not an image reference"),
    ({"immutable_tag": f"user:{PASSWORD}@registry.example.com/llm/vllm:dg-1"},
     "immutable_tag", "holds credentials (not shown)"),
    ({"immutable_tag": "registry.example.com/llm/vllm"}, "immutable_tag",
     "is not an image reference"),  # no tag: the dg-<hash> is read from it
])
@pytest.mark.parametrize("fmt", ["compose", "k8s"])
def test_a_record_with_bad_references_is_exit_2(tmp_path: Path, fields: dict[str, Any],
                                                key: str, words: str, fmt: str) -> None:
    record = _record(tmp_path, **fields)
    out = tmp_path / "out.yaml"
    run = _deploy(fmt, "--record", str(record), "-o", str(out))
    _refused(run, 2, f"{record}: {key}: ", words)
    assert PASSWORD not in run.err + run.out
    assert "\nevil: injected" not in run.err
    assert not out.exists()


def test_a_record_of_what_build_writes_still_pins(tmp_path: Path) -> None:
    record = _record(tmp_path, pushed={
        "localhost:5000/dockergen-test/standin:dg-56f4498e3807": DIGEST,
        "localhost:5000/dockergen-test/standin": DIGEST})  # a --tag without a tag
    run = _deploy("compose", "--record", str(record))
    assert run.rc == 0, run.err
    image = yaml.safe_load(run.out)["services"]["h100-fp8"]["image"]
    assert image == f"localhost:5000/dockergen-test/standin@{DIGEST}"


# --- the model mount never covers what the image needs ---------------------------------------

@pytest.mark.parametrize(("model", "problem", "fix"), [
    ("/opt/m", "parent folder /opt, which covers /opt/venv of the image", "/models/m"),
    ("/usr/m", "parent folder /usr, which covers /usr of the image", "/models/m"),
    ("/home/app/m", "parent folder /home/app, which covers /home/app of the image",
     "/models/m"),
    ("/m", "parent folder, here / (the whole image", "/models/m"),
    ("/models/../etc", "'/models/../etc' is not a normalised path", "/models/etc"),
    ("/models//m", "'/models//m' is not a normalised path", "/models/m"),
    ("/models/m/", "'/models/m/' is not a normalised path", "/models/m"),
    ("/etc/dockergen/m", "parent folder /etc/dockergen, which lies in /etc of the image",
     "/models/m"),
    ("/home/app/.cache/m", "parent folder /home/app/.cache, which lies in /home/app of the "
                           "image", "/models/m"),
    ("/tmp/m", "parent folder /tmp, which covers /tmp of the image", "/models/m"),
], ids=["opt", "usr", "home", "root", "dotdot", "double-slash", "trailing-slash", "etc",
        "cache", "tmp"])
def test_a_model_mount_may_not_cover_the_image(tmp_path: Path, model: str, problem: str,
                                               fix: str) -> None:
    """deploy mounted the model's parent read-only: /opt/m hid the venv and Python the
    entrypoint runs, /m mounted over /, /models/../etc at /models/.."""
    profile = tmp_path / "p.yaml"
    profile.write_text(f"extends: h100-fp8\nname: p\nserving:\n  model: {json.dumps(model)}\n")
    for args in (("validate", "p.yaml"), ("deploy", "p.yaml", "--format", "compose"),
                 ("deploy", "p.yaml", "--format", "k8s", "-o", "out"),
                 ("render", "p.yaml", "-o", "ctx")):
        run = run_cli(*args, cwd=tmp_path)
        _refused(run, 2, "p.yaml:4:10: serving.model: ", problem,
                 f"put the model in a folder of its own, e.g. serving.model: {fix}")
        assert run.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml"]
    # the fix is valid, and its mount is the folder of its own
    ok = run_cli("deploy", "p.yaml", "--format", "compose", "-q", "--set",
                 f"serving.model={fix}", cwd=tmp_path)
    assert ok.rc == 0, ok.err
    mounts = yaml.safe_load(ok.out)["services"]["p"]["volumes"]
    assert [m["target"] for m in mounts if m.get("type") == "bind"] == ["/models"]


def test_models_in_a_folder_of_their_own_are_accepted(tmp_path: Path) -> None:
    for model in ("/models/llama", "/data/models/llama", "/opt/models/llama", "/srv/m",
                  "/mnt/weights/x", "meta-llama/Llama-3.1-8B"):
        run = run_cli("validate", PROFILE, "--set", f"serving.model={model}")
        assert run.rc == 0, (model, run.err)
