"""Image references: the one grammar every part of dockergen parses them with.

The grammar is the distribution reference grammar (what ``docker build -t``, ``docker pull``
and registries accept), with Docker's normalization of a name's first component::

    reference  := name [ ":" tag ] [ "@" digest ]
    name       := [domain "/"] path                   total length <= 255
    domain     := host [":" port]                     host: DNS labels or [IPv6]
    path       := component ("/" component)*          component: [a-z0-9]+ joined by
                                                      ".", "_", "__" or one or more "-"
    tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest     := algorithm ":" hex                   sha256/sha384/sha512, lowercase hex

The first component of a name is a domain only if it holds a ``.`` or a ``:``, is
``localhost`` or has an uppercase letter; otherwise the name is on Docker Hub
(``ubuntu`` is ``docker.io/library/ubuntu``). So ``my_registry:5000/x`` is no reference:
its first component is a domain (it has a port), and ``_`` is not allowed in a host name.
src: github.com/distribution/reference reference.go (grammar), regexp.go (patterns),
normalize.go (splitDockerDomain, ParseNormalizedNamed); github.com/opencontainers/go-digest
algorithm.go (the digest algorithms and their hex lengths).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DOCKER_HUB = "docker.io"
_LEGACY_HUB = "index.docker.io"
NAME_MAX = 255

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_PATH = rf"{_COMPONENT}(?:/{_COMPONENT})*"
_DOMAIN_LABEL = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_HOST = rf"(?:{_DOMAIN_LABEL}(?:\.{_DOMAIN_LABEL})*|\[[A-Fa-f0-9:]+\])"
_DOMAIN = re.compile(rf"{_HOST}(?::[0-9]+)?")
# Go's \w is ASCII: written out, so that Python's Unicode \w does not widen it
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REMAINDER = re.compile(rf"({_PATH})(?::({_TAG}))?(?:@({_DIGEST}))?")
_IDENTIFIER = re.compile(r"[a-f0-9]{64}")
# the algorithms go-digest registers in docker, and the length of their hex encoding
_DIGEST_HEX = {"sha256": 64, "sha384": 96, "sha512": 128}
_HEX = re.compile(r"[a-f0-9]+")

EXAMPLE = "registry.example.com/llm/vllm:0.11.0"


def schema_pattern(tag: bool = True, digest: bool = True) -> str:
    """The grammar as one regular expression, for a JSON Schema ``pattern``: it accepts a
    superset of :func:`is_reference` (the name length and the digest algorithms are checked
    in code)."""
    return (rf"(?:{_DOMAIN.pattern}/)?{_PATH}" + (rf"(?::{_TAG})?" if tag else "")
            + (rf"(?:@{_DIGEST})?" if digest else ""))


class InvalidReference(ValueError):
    """Not an image reference; the message says why, for a reader."""


@dataclass(frozen=True)
class Reference:
    """A parsed image reference: ``[domain/]path[:tag][@digest]`` as written.

    ``domain`` is empty when the name has none (Docker Hub); :attr:`registry` and
    :attr:`repository` give the normalized form registries are addressed with.
    """

    domain: str
    path: str
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        """The name as written, without tag and digest (``docker tag``'s REPOSITORY)."""
        return f"{self.domain}/{self.path}" if self.domain else self.path

    @property
    def registry(self) -> str:
        """The registry host (``docker.io`` for Docker Hub names)."""
        if not self.domain or self.domain == _LEGACY_HUB:
            return DOCKER_HUB
        return self.domain

    @property
    def repository(self) -> str:
        """The repository in the registry (``library/ubuntu`` for official images)."""
        if self.registry == DOCKER_HUB and "/" not in self.path:
            return f"library/{self.path}"
        return self.path

    def __str__(self) -> str:
        return (self.name + (f":{self.tag}" if self.tag is not None else "")
                + (f"@{self.digest}" if self.digest is not None else ""))


def _split_domain(ref: str) -> tuple[str, str]:
    """(domain as written or "", the rest): Docker's rule for the first component."""
    first, sep, rest = ref.partition("/")
    if sep and (any(c in first for c in ".:") or first == "localhost"
                or first.lower() != first):
        return first, rest
    return "", ref


def parse(ref: str) -> Reference:
    """Parse ``ref`` by the distribution grammar; raise :class:`InvalidReference`."""
    if not ref:
        raise InvalidReference("an empty reference")
    if _IDENTIFIER.fullmatch(ref):
        raise InvalidReference("64 hex digits are an image id, not a repository name")
    domain, rest = _split_domain(ref)
    if domain and not _DOMAIN.fullmatch(domain):
        raise InvalidReference(f"{domain!r} is not a registry host[:port] (letters, digits, "
                               "'-' and '.'; a numeric port)")
    m = _REMAINDER.fullmatch(rest)
    if m is None:
        if _REMAINDER.fullmatch(rest.lower()):  # only the case of the path is wrong
            raise InvalidReference("a repository name must be lowercase")
        raise InvalidReference("not [REGISTRY/]REPOSITORY[:TAG][@DIGEST] (lowercase "
                               "repository components joined by '/', a tag of at most 128 "
                               "letters, digits, '_', '.' or '-')")
    path, tag, digest = m.groups()
    parsed = Reference(domain, path, tag, digest)
    normalized = f"{parsed.registry}/{parsed.repository}"
    if len(normalized) > NAME_MAX:
        raise InvalidReference(f"the name is {len(normalized)} characters long (as "
                               f"{parsed.registry}/...); at most {NAME_MAX}")
    if digest is not None:
        _check_digest(digest)
    return parsed


def _check_digest(digest: str) -> None:
    algorithm, _, hex_part = digest.partition(":")
    size = _DIGEST_HEX.get(algorithm)
    if size is None:
        raise InvalidReference(f"digest algorithm {algorithm!r}: use one of "
                               + ", ".join(_DIGEST_HEX))
    if len(hex_part) != size or not _HEX.fullmatch(hex_part):
        raise InvalidReference(f"a {algorithm} digest is {size} lowercase hex digits")


def check(ref: str, *, tag: bool | None = None, digest: bool | None = None) -> Reference:
    """Parse ``ref`` and require (True), refuse (False) or allow (None) a tag and a digest."""
    parsed = parse(ref)
    for part, want, value in (("tag", tag, parsed.tag), ("digest", digest, parsed.digest)):
        if want is True and value is None:
            raise InvalidReference(f"it has no {part}")
        if want is False and value is not None:
            raise InvalidReference(f"it has a {part}; give the reference without one")
    return parsed


def is_reference(ref: str, *, tag: bool | None = None, digest: bool | None = None) -> bool:
    """Whether :func:`check` accepts ``ref`` with these requirements."""
    try:
        check(ref, tag=tag, digest=digest)
    except InvalidReference:
        return False
    return True
