"""Size and layers of real images built by dockergen, against published upstream figures.

Usage (with the provisioned engine, after `dockergen build` of the shipped profiles from PyPI,
as tests/network/test_real_images.py does; keep them with DOCKERGEN_TEST_KEEP_IMAGES=1)::

    python benchmarks/image_size_bench.py IMAGE [IMAGE ...]

For each image: its total and per-layer size (uncompressed, as the engine stores it), the 15
largest installed Python distributions (their RECORD sizes), shared objects present twice
(the same file name and size in two places), and what the base image adds. Then the ratios
docs/building.md quotes: the image against the published upstream sizes (marked as published, not
measured here), against its own Python environment plus a minimal OS (the physical floor),
the largest layer's share, and for all images given, the bytes a registry stores (each
distinct layer once) against the sum of the images' sizes.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import docker

# Published, not measured here (no Docker Hub from these machines): the upstream vLLM image
# and a plain pip install, with where each figure was stated.
PUBLISHED = {
    "vllm/vllm-openai (vllm#27154)": 12.6e9,
    "vllm/vllm-openai, devel final stage (vllm PR #22377)": 28.6e9,
    "pip install vllm on python:3.12-slim (vllm#13112)": 7.07e9,
}
GB = 1e9
# The diff ID of an empty layer (a WORKDIR that exists, ...): no history step has a size.
EMPTY_LAYER = "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"

# Runs in the image: sizes of the distributions (RECORD) and duplicate shared objects.
SCRIPT = r"""
import csv, glob, json, os, sysconfig, collections
site = sysconfig.get_paths()["purelib"]
dists = {}
for record in glob.glob(os.path.join(site, "*.dist-info", "RECORD")):
    name = os.path.basename(os.path.dirname(record))[:-len(".dist-info")]
    total = 0
    with open(record, newline="") as fh:
        for row in csv.reader(fh):
            path = os.path.normpath(os.path.join(site, row[0])) if row else ""
            if path and os.path.isfile(path) and not os.path.islink(path):
                total += os.path.getsize(path)
    dists[name] = total
seen = collections.defaultdict(list)
for folder, _dirs, files in os.walk("/"):
    if folder.startswith(("/proc", "/sys", "/dev")):
        continue
    for f in files:
        p = os.path.join(folder, f)
        if ".so" in f and os.path.isfile(p) and not os.path.islink(p):
            seen[(f, os.path.getsize(p))].append(p)
dups = sorted(([k[0], k[1], v] for k, v in seen.items() if len(v) > 1), key=lambda d: -d[1])
venv = sum(os.path.getsize(os.path.join(d, f)) for d, _s, fs in os.walk("/opt/venv")
           for f in fs if not os.path.islink(os.path.join(d, f)))
print(json.dumps({"dists": dists, "dups": dups[:15], "venv": venv}))
"""


def layers(client: Any, ref: str) -> list[tuple[int, str]]:
    """(size, created-by) of each layer, oldest first (the engine's history)."""
    history = client.api.history(ref)
    return [(h["Size"], h["CreatedBy"]) for h in reversed(history)]


def report(client: Any, ref: str, base: str | None) -> dict[str, Any]:
    image = client.images.get(ref)
    out = client.containers.run(ref, ["-c", SCRIPT], entrypoint="/opt/venv/bin/python",
                                remove=True, user="0")
    inside = json.loads(out.decode().strip().splitlines()[-1])
    base_size = client.images.get(base).attrs["Size"] if base else 0
    return {"ref": ref, "size": image.attrs["Size"], "layers": layers(client, ref),
            "rootfs": image.attrs["RootFS"]["Layers"], "base": base_size, **inside}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    client = docker.from_env(timeout=600)
    rows = []
    for ref in argv:
        base = client.images.get(ref).attrs["Config"]["Labels"].get(
            "org.opencontainers.image.base.name")
        rows.append(report(client, ref, base))
    for r in rows:
        size = r["size"]
        print(f"\n## {r['ref']}: {size / GB:.2f} GB uncompressed")
        print("layers (size, step):")
        for layer_size, step in r["layers"]:
            if layer_size:
                print(f"  {layer_size / GB:7.3f} GB  {step[-90:]}")
        largest = max(s for s, _ in r["layers"])
        print(f"largest layer: {largest / GB:.2f} GB = {largest / size:.0%} of the image")
        print("15 largest distributions:")
        for name, n in sorted(r["dists"].items(), key=lambda kv: -kv[1])[:15]:
            print(f"  {n / GB:7.3f} GB  {name}")
        print("shared objects present twice (name, size, places):")
        for name, n, places in r["dups"] or [["none", 0, []]]:
            print(f"  {n / 1e6:8.1f} MB  {name}  {len(places)}x: {', '.join(places[:3])}")
        floor = r["venv"] + r["base"]
        print(f"base image: {r['base'] / GB:.2f} GB; Python environment /opt/venv: "
              f"{r['venv'] / GB:.2f} GB; floor (venv + base): {floor / GB:.2f} GB")
        print(f"image / floor: {size / floor:.3f} (goal <= 1.15)")
        for label, published in PUBLISHED.items():
            print(f"image / {label} [published]: {size / published:.2f}")
    if len(rows) > 1:
        total = sum(r["size"] for r in rows)
        distinct: dict[str, int] = {}
        for r in rows:  # the history's non-empty steps are the rootfs layers, in order
            digests = [d for d in r["rootfs"] if d != EMPTY_LAYER]
            sized = [s for s, _ in r["layers"] if s]
            if len(digests) != len(sized):
                print(f"{r['ref']}: {len(digests)} layers but {len(sized)} sized steps; "
                      "the stored-bytes ratio needs them aligned")
                return 1
            distinct.update(zip(digests, sized, strict=True))
        stored = sum(distinct.values())
        print(f"\nfleet: sum of image sizes {total / GB:.2f} GB; a registry stores "
              f"{stored / GB:.2f} GB (each distinct layer once): ratio {stored / total:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
