"""``dockergen observe``: the monitoring that fits a profile's engine release.

A profile names the exact engine release in the image; this package turns that into a
Prometheus scrape config, recording and alert rules, and a Grafana dashboard whose queries
use the metric names that release really exposes (``data/metrics.yaml``).

It is its own command rather than part of ``deploy``: monitoring is loaded into a
Prometheus/Grafana that exists independently of how the server is deployed (compose, k8s,
bare docker), it is re-generated when alert budgets change without touching the
deployment, and it needs the Grafana SDK that no other command should import.

May import: dockergen.observe.generate.
"""

from __future__ import annotations

from dockergen.observe.generate import (
    ObserveResult,
    observe_profile,
    settings_problems,
    source_of,
    write_output,
    write_outputs,
)

__all__ = ["ObserveResult", "observe_profile", "settings_problems", "source_of", "write_output",
           "write_outputs"]
