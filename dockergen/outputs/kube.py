"""The Kubernetes facts the run-side outputs share: ``deploy --format k8s`` writes the
objects that run the image, ``observe --format k8s`` the monitoring that must find them, so
the namespace, the labels that select the pods and the name of the server port are defined
here once, with the rules of the names both accept.
"""

from __future__ import annotations

import re

from dockergen.errors import holds_secret, shown_value

# The namespace both outputs use unless --namespace names another.
DEFAULT_NAMESPACE = "llm-serving"
# The label every object carries and every selector matches (Kubernetes recommended labels,
# kubernetes.io/docs/concepts/overview/working-with-objects/common-labels/).
NAME_LABEL = "app.kubernetes.io/name"
MANAGED_BY = ("app.kubernetes.io/managed-by", "dockergen")
# The server container's and Service's named port: health, API and /metrics share it.
SERVER_PORT_NAME = "http"

# Kubernetes object names ("Object Names and IDs",
# kubernetes.io/docs/concepts/overview/working-with-objects/names/): a namespace is an RFC
# 1123 label (at most 63 characters); Secret, PersistentVolumeClaim and RuntimeClass names
# are DNS subdomain names (at most 253): lowercase alphanumerics and '-', dot-separated
# labels, each starting and ending with an alphanumeric.
_DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(
    r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
_DNS_SUBDOMAIN_MAX = 253


def labels(name: str) -> dict[str, str]:
    """The labels of every object dockergen writes for profile ``name``."""
    return {NAME_LABEL: name, MANAGED_BY[0]: MANAGED_BY[1]}


def selector(name: str) -> dict[str, str]:
    """The labels that select the pods (and the Service) of profile ``name``."""
    return {NAME_LABEL: name}


def name_problem(option: str, value: str, label: bool, example: str, what: str) -> str | None:
    """Why ``value`` of ``option`` cannot name ``what`` (an RFC 1123 label if ``label``, else
    a DNS subdomain name), with the fix; None when it can. A valid name can still be a
    credential (an ``sk-...`` key in lowercase): it is never written, nor shown."""
    shape, most = (_DNS_LABEL, 63) if label else (_DNS_SUBDOMAIN, _DNS_SUBDOMAIN_MAX)
    if len(value) <= most and shape.fullmatch(value) and not holds_secret(value):
        return None
    rule = ("an RFC 1123 label" if label else "a DNS subdomain name") + (
        f" (at most {most} lowercase letters, digits and '-'"
        + ("" if label else ", in '.'-separated parts")
        + ", starting and ending with a letter or digit)")
    if holds_secret(value):
        return (f"{option}: the value looks like a credential (not shown), not the name of "
                f"{what}; give the name, {rule}, e.g. {option} {example}"
                + ("; create it with `kubectl create secret generic hf-token "
                   "--from-literal=token=$HF_TOKEN`" if option == "--hf-secret" else ""))
    return (f"{option} {shown_value(value)}: not {rule}, as Kubernetes requires for the name "
            f"of {what}; e.g. {option} {example}")
