"""``dockergen verify``: an image's signature, SBOM and provenance against a public key.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("image")
@click.option("--key", required=True, metavar="KEY",
              help="The public key: a file (cosign.pub), env://VAR, or a KMS reference "
                   "(awskms://, gcpkms://, hashivault://, azurekms://).")
@click.option("--lock", type=click.Path(dir_okay=False), metavar="LOCK",
              help="The Python lock the image was built from: the SBOM must list exactly "
                   "its distributions and hashes.")
@click.option("--record", type=click.Path(dir_okay=False), metavar="RECORD",
              help="The build record (build-record.json): the provenance must name its "
                   "profile hash, base digests and pushed digest.")
def verify(image: str, key: str, lock: str | None, record: str | None) -> None:
    """Verify IMAGE's signature and its SBOM and provenance attestations (cosign)."""
    from dockergen.trust.verify import VerifyFailed
    from dockergen.trust.verify import verify as run

    report = run(image, key, Path(lock) if lock else None, Path(record) if record else None)
    for line in report.lines():
        click.echo(line)
    if report.failed:
        raise VerifyFailed(f"{image}: verification failed: {', '.join(report.failed)} "
                           "(see the report above)")
