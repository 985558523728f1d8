"""`--ca-cert` and `build.ca_certificates` take any file path, spaces included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import PROFILES, ROOT, a_pem_certificate, run_cli
from tests.support.bad_profile_cases import VALID

PROFILE = ROOT / "tests" / "profiles" / "standin.yaml"


def test_ca_cert_path_with_spaces(tmp_path: Path) -> None:
    """Was: the path went back through a YAML --set and failed the [A-Za-z0-9._/-] shape."""
    cert = tmp_path / "corp certs" / "proxy ca (2026).crt"
    cert.parent.mkdir()
    cert.write_text(a_pem_certificate())
    result = run_cli("build", str(PROFILE), "--dry-run", "-q", "--ca-cert", str(cert))
    assert result.rc == 0, result.err
    assert "  certs/extra-0.crt" in result.out.splitlines()
    out = tmp_path / "ctx"
    rendered = run_cli("render", "-q", str(PROFILE), "-o", str(out), "--set",
                       f'build.ca_certificates=["{cert}"]')
    assert rendered.rc == 0, rendered.err
    assert (out / "certs" / "extra-0.crt").read_text() == cert.read_text()


def test_profile_ca_certificate_with_spaces(tmp_path: Path) -> None:
    (tmp_path / "my proxy.crt").write_text(a_pem_certificate())
    (tmp_path / "profile.yaml").write_text(
        VALID.replace("  memory_gib: 64", '  memory_gib: 64\n  ca_certificates: ["my proxy.crt"]'))
    result = run_cli("render", "-q", "profile.yaml", "-o", "out", cwd=tmp_path)
    assert result.rc == 0, result.err
    assert (tmp_path / "out" / "certs" / "extra-0.crt").is_file()


def test_missing_ca_cert_is_a_usage_error() -> None:
    result = run_cli("build", str(PROFILE), "--dry-run", "-q", "--ca-cert", "/nonexistent/x.crt")
    assert result.rc == 64
    assert result.err.splitlines()[0].endswith(
        "--ca-cert '/nonexistent/x.crt': no such file; give a PEM certificate")


def _corrupted(pem: str) -> str:
    """A certificate whose markers are right and whose body is not a certificate."""
    lines = pem.splitlines()
    return "\n".join([lines[0], "notbase64!!", lines[-1]]) + "\n"


def test_a_certificate_openssl_cannot_read_is_refused_before_the_build(tmp_path: Path) -> None:
    """The markers alone passed; the build then failed in update-ca-certificates."""
    (tmp_path / "bad.crt").write_text(_corrupted(a_pem_certificate()))
    (tmp_path / "good.crt").write_text(a_pem_certificate())
    (tmp_path / "p.yaml").write_text("extends: h100-fp8\nname: ca\nbuild:\n"
                                     "  ca_certificates: [good.crt, bad.crt]\n")
    result = run_cli("validate", str(tmp_path / "p.yaml"))
    assert result.rc == 2, result.err
    assert "build.ca_certificates[1]: bad.crt holds a certificate OpenSSL cannot read" \
        in result.err
    assert "ca_certificates[0]" not in result.err  # the real certificate passes
    assert "Traceback" not in result.err
    dry = run_cli("build", "--dry-run", "h100-fp8", "--ca-cert", str(tmp_path / "bad.crt"))
    assert dry.rc == 2, dry.err
    assert "holds a certificate OpenSSL cannot read" in dry.err and dry.out == ""


def test_a_certificate_is_read_once_and_the_context_copies_those_bytes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its check read it, and rendering read it again: a file replaced in between would
    have been checked as one certificate and copied as another."""
    from dockergen.files import inputs
    from dockergen.pipeline import resolution

    cert = tmp_path / "corp.crt"
    cert.write_text(a_pem_certificate())
    profile = tmp_path / "p.yaml"
    profile.write_text((PROFILES / "h100-fp8.yaml").read_text().replace(
        "extends: base", "extends: base\nbuild:\n  ca_certificates: [corp.crt]"))
    reads: list[Path] = []
    real = inputs.read_bytes

    def counted(path: Path, kind: str) -> bytes:
        if kind == "certificate":
            reads.append(path)
        return real(path, kind)

    monkeypatch.setattr(inputs, "read_bytes", counted)
    ctx = resolution(profile)
    assert len(reads) == 1, reads
    assert ctx.files()["certs/extra-0.crt"] == cert.read_bytes()


def test_a_given_certificate_is_an_input_of_the_build_not_of_the_profile(
        tmp_path: Path) -> None:
    """`build --ca-cert` was an override of build.ca_certificates: the machine's path to the
    certificate entered the profile's record and hash, so `deploy --record` refused the
    record of that build ("built from another profile"). The certificate is copied into the
    build context (its bytes change the dg- content tag), and the profile hash stays the
    profile's."""
    from dockergen.errors import Location
    from dockergen.pipeline import resolution
    from dockergen.resolve.model import GivenCertificate

    cert = tmp_path / "corp-ca.crt"
    cert.write_text(a_pem_certificate())
    plain = resolution(PROFILE)
    given = resolution(PROFILE, certificates=(GivenCertificate(cert, Location("--ca-cert")),))
    assert given.resolved.profile_hash == plain.resolved.profile_hash
    assert str(tmp_path) not in json.dumps(dict(given.resolved.record))
    assert given.files()["certs/extra-0.crt"] == cert.read_bytes()
    assert "certs/extra-0.crt" not in plain.files()
    assert given.content_tag != plain.content_tag
    dry = run_cli("build", str(PROFILE), "--dry-run", "-q", "--ca-cert", str(cert))
    assert dry.rc == 0, dry.err
    assert given.content_tag in dry.out
