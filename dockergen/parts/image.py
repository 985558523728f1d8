"""The image as a whole: its tags, its labels and what it must never carry.

Owns the ``image-tags`` check (tag templates with known placeholders that give valid
tags), the secret check on labels, and the label set of the runtime stage (OCI labels plus
``dockergen.*`` labels that the smoke tests read back).
"""

from __future__ import annotations

import re

from dockergen import __version__
from dockergen.input.profile import Profile
from dockergen.resolve.context import Context
from dockergen.resolve.model import Derivation

TAG_FIELDS = ("name", "engine.name", "engine.version", "cuda.version", "cuda.major_minor",
              "python", "quantization.weights", "quantization.kv_cache")
_TAG_VALUE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def tag_values(p: Profile) -> dict[str, str]:
    """Values of the placeholders allowed in ``image.tags``."""
    return {
        "name": p.name, "engine.name": p.engine.name, "engine.version": p.engine.version,
        "cuda.version": p.cuda.version,
        "cuda.major_minor": ".".join(p.cuda.version.split(".")[:2]).replace(".", ""),
        "python": p.python, "quantization.weights": p.quantization.weights,
        "quantization.kv_cache": p.quantization.kv_cache,
    }


def expand_tag(template: str, values: dict[str, str]) -> str:
    """Replace ``{field}`` placeholders of a tag template."""
    return re.sub(r"{([^{}]*)}", lambda m: values[m.group(1)], template)


def check_tags(c: Context) -> None:
    """image-tags: tag templates use known placeholders and give valid tags."""
    values = tag_values(c.p)
    for i, template in enumerate(c.p.image.tags):
        names = re.findall(r"{([^{}]*)}", template)
        unknown = [n for n in names if n not in values]
        if unknown or template.count("{") != len(names) or template.count("}") != len(names):
            c.error(("image", "tags", i), "unknown placeholder "
                    + (repr("{" + unknown[0] + "}") if unknown else "(unbalanced braces)"),
                    "use " + ", ".join("{" + f + "}" for f in TAG_FIELDS))
            continue
        tag = expand_tag(template, values)
        if not _TAG_VALUE.fullmatch(tag):
            c.error(("image", "tags", i), f"gives {tag!r}, which is not a valid image tag",
                    "tags are letters, digits, '_', '.', '-' (at most 128), not starting "
                    "with '.' or '-'")


def tags(p: Profile) -> list[str]:
    """The release tags of a checked profile (the content tag is added by resolve)."""
    values = tag_values(p)
    return [expand_tag(t, values) for t in p.image.tags]


def labels(p: Profile, runtime_image: str, profile_hash: str,
           contributed: dict[str, str], d: list[Derivation]) -> dict[str, str]:
    """OCI and dockergen labels; the components' own labels; the profile's last (ours win).

    Each of the profile's labels is a derivation (``explain``), with the value the image
    carries: dockergen's own where it wins."""
    out = {
        "org.opencontainers.image.title": p.name,
        "org.opencontainers.image.version": p.engine.version,
        "org.opencontainers.image.base.name": runtime_image,
        "dockergen.profile.name": p.name,
        "dockergen.profile.hash": profile_hash,
        "dockergen.quantization": f"weights={p.quantization.weights},"
                                  f"kv_cache={p.quantization.kv_cache}",
        "dockergen.runtime.uid": str(p.runtime.uid),
        "dockergen.version": __version__,
        **contributed,
    }
    if p.description:
        out["org.opencontainers.image.description"] = p.description
    for key, value in sorted(p.image.labels.items()):
        if key in out:  # ours win: they are what the smoke tests check
            d.append(Derivation(f"label {key}", out[key], f"image.labels sets {value!r}, but "
                                "dockergen's own label wins (the smoke tests read it)", ""))
            continue
        out[key] = value
        d.append(Derivation(f"label {key}", value, "from image.labels", ""))
    return dict(sorted(out.items()))
