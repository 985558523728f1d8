"""`build --sign` and `verify`: every mistake is refused before any work, with its exit code
and no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli

PROFILE = str(ROOT / "tests" / "profiles" / "standin.yaml")


@pytest.mark.parametrize(("args", "env", "rc", "message"), [
    (("--sign",), {}, 64, "--sign and --sign-key go together"),
    (("--sign-key", "k.key"), {}, 64, "--sign and --sign-key go together"),
    (("--sign", "--sign-key", "missing.key", "--push"), {}, 64,
     "--sign-key 'missing.key': no such key file"),
    (("--sign", "--sign-key", "ftp://x/key", "--push"), {}, 64,
     "not a key reference cosign takes"),
    (("--sign", "--sign-key", "env://DG_NO_SUCH_KEY_VAR", "--push"), {}, 64,
     "the variable DG_NO_SUCH_KEY_VAR is not set"),
    (("--sign", "--sign-key", "awskms:///alias/k"), {}, 64,
     "--sign signs what is pushed: add --push"),
    (("--sign", "--sign-key", "awskms:///alias/k", "--push"),
     {"DOCKERGEN_COSIGN": "/nonexistent/cosign"}, 3,
     "DOCKERGEN_COSIGN='/nonexistent/cosign' is not a program"),
])
def test_build_sign_mistakes(args: tuple[str, ...], env: dict[str, str], rc: int,
                             message: str) -> None:
    result = run_cli("build", PROFILE, *args, env=env)
    assert result.rc == rc, result.err
    assert message in result.err and "Traceback" not in result.err
    assert result.out == ""


def test_verify_mistakes(tmp_path: Path) -> None:
    key = tmp_path / "cosign.pub"
    key.write_text("-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----\n")
    bad = run_cli("verify", "Not/A:Reference:x", "--key", str(key))
    assert bad.rc == 64 and "not an image reference" in bad.err
    no_key = run_cli("verify", "localhost:5000/x:1", "--key", str(tmp_path / "none.pub"))
    assert no_key.rc == 64 and "no such key file" in no_key.err
    no_lock = run_cli("verify", "localhost:5000/x:1", "--key", str(key), "--lock",
                      str(tmp_path / "none.lock"))
    assert no_lock.rc == 2 and "--lock" in no_lock.err and "no such file" in no_lock.err
    (tmp_path / "r.json").write_text("{\"profile\": 1}")
    bad_record = run_cli("verify", "localhost:5000/x:1", "--key", str(key), "--record",
                         str(tmp_path / "r.json"))
    assert bad_record.rc == 2 and "--record" in bad_record.err
    for result in (bad, no_key, no_lock, bad_record):
        assert "Traceback" not in result.err and result.out == ""


def test_verify_without_cosign_is_exit_3(tmp_path: Path) -> None:
    key = tmp_path / "cosign.pub"
    key.write_text("x")
    result = run_cli("verify", "localhost:5000/x:1", "--key", str(key),
                     env={"DOCKERGEN_COSIGN": str(tmp_path / "no-cosign")})
    assert result.rc == 3 and "is not a program" in result.err
    assert "Traceback" not in result.err
