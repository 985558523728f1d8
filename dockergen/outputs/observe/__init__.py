"""``dockergen observe``: the monitoring that fits a profile's engine release.

A profile names the exact engine release in the image; this package turns that into a
Prometheus scrape config, recording and alert rules, and a Grafana dashboard whose queries
use the metric names that release really exposes (each engine's ``metrics.yaml``, in its folder).

It is its own command rather than part of ``deploy``: monitoring is loaded into a
Prometheus/Grafana that exists independently of how the server is deployed (compose, k8s,
bare docker), it is re-generated when alert budgets change without touching the
deployment, and it needs the Grafana SDK that no other command should import.

The modules are imported by name (``dockergen.outputs.observe.generate`` for the command): the
package imports nothing itself, so reading ``metrics`` (the knowledge) or ``families`` (the
wheel reader) does not load the Grafana SDK.
"""
