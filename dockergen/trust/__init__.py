"""Evidence about a pushed image: its SBOM, its provenance, cosign's signatures, and the
check of all three (``dockergen verify``).

- :mod:`.sbom`: the CycloneDX SBOM from what dockergen knows for certain (the hashed Python
  lock, the runtime stage's dpkg status, the source-built FlashAttention, the base digests);
- :mod:`.provenance`: the in-toto Statement with its SLSA provenance v1 predicate;
- :mod:`.cosign`: the one module that runs cosign (key references, password, errors);
- :mod:`.attest`: the step after a push that writes both and signs them (``build --sign``);
- :mod:`.verify`: ``dockergen verify``: signatures, attestations and their contents.
"""
