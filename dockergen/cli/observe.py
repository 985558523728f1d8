"""``dockergen observe``: Prometheus scrape config, recording and alert rules and a Grafana
dashboard for a profile's engine release (or for every shipped profile).
"""

from __future__ import annotations

from pathlib import Path

import click

from dockergen.cli import params
from dockergen.cli.app import (
    folder_given,
    quiet_option,
    refuse_other_format,
    set_option,
    warn,
)
from dockergen.errors import ProfileError, holds_secret
from dockergen.outputs import kube


@click.command()
@click.argument("profile", required=False, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False),
              callback=folder_given,
              help="Folder for the monitoring files (with --all: OUTPUT/<name>/).")
@click.option("--all", "observe_all", is_flag=True,
              help="Every shipped profile into OUTPUT/<name>/ (how examples/observe is made).")
@click.option("--format", "fmt", type=params.OBSERVE_FORMAT, default="prometheus",
              show_default=True,
              help="prometheus: prometheus.yml + rule files; k8s: Prometheus Operator "
                   "PodMonitor/ServiceMonitor + PrometheusRule. Both add dashboard.json.")
@click.option("--monitor", type=click.Choice(["PodMonitor", "ServiceMonitor"]),
              default="PodMonitor", show_default=True, help="With --format k8s.")
@click.option("--port-name", default=kube.SERVER_PORT_NAME, show_default=True,
              help="With --format k8s: the named container/service port serving metrics.")
@click.option("--namespace", default=kube.DEFAULT_NAMESPACE, show_default=True,
              help="With --format k8s: the namespace the monitor and rules live in and "
                   "select, the one `deploy --format k8s --namespace` deploys into.")
@click.option("--target", "scrape_targets", multiple=True, metavar="HOST:PORT",
              help="Scrape target (repeatable); default observe.targets or localhost:PORT.")
@set_option
@quiet_option
def observe(profile: str | None, output: str, observe_all: bool, fmt: str, monitor: str,
            port_name: str, namespace: str, scrape_targets: tuple[str, ...],
            overrides: tuple[str, ...], quiet: bool) -> None:
    """Write Prometheus scrape config, recording and alert rules and a Grafana dashboard
    whose queries use the metric names of PROFILE's engine release."""

    import re

    from dockergen.api import shipped_single_images
    from dockergen.input.values import PATTERNS
    from dockergen.outputs.observe.generate import observe as monitoring
    from dockergen.outputs.observe.generate import write_output, write_outputs
    from dockergen.pipeline import resolution

    if observe_all == bool(profile):
        raise click.UsageError("give either PROFILE or --all")
    refuse_other_format(click.get_current_context(), fmt,
                         (("monitor", "--monitor", "k8s"), ("port_name", "--port-name", "k8s"),
                          ("namespace", "--namespace", "k8s")))
    problem = kube.name_problem("--namespace", namespace, True, kube.DEFAULT_NAMESPACE,
                                "a namespace")
    if problem:
        raise click.UsageError(problem)
    # a named container port (Kubernetes IANA_SVC_NAME): at most 15 of [a-z0-9-], a letter
    # among them, no '-' at either end or twice in a row (src: k8s.io apimachinery
    # validation.IsValidPortName)
    if not re.fullmatch(r"(?=[a-z0-9-]*[a-z])[a-z0-9](?:-?[a-z0-9]){0,14}", port_name) \
            or len(port_name) > 15:
        raise click.UsageError(f"--port-name {port_name!r}: expected a Kubernetes port name "
                               "like http or metrics (at most 15 of a-z, 0-9 and '-')")
    shape, what = PATTERNS["scrape_target"]
    for scrape_target in scrape_targets:
        if holds_secret(scrape_target):  # a key is a valid host name: it would be written out
            raise click.UsageError(f"--target: a value shaped like a credential (not shown); "
                                   f"expected {what}")
        if not shape.fullmatch(scrape_target):
            raise click.UsageError(f"--target {scrape_target!r}: expected {what}")
    # one image per profile: a matrix profile's variants are not observed yet
    paths = shipped_single_images() if observe_all else [Path(profile)]  # type: ignore[arg-type]
    results, problems = [], []
    for path in paths:
        try:
            results.append(monitoring(resolution(path, overrides), fmt,  # type: ignore[arg-type]
                                      scrape_targets, monitor, port_name, namespace))
        except ProfileError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ProfileError(problems)
    for result in results:
        warn([str(w) for w in result.warnings], quiet)
    if observe_all:  # every profile's folder changes together
        write_outputs(Path(output), {r.name: r.files for r in results})
    else:
        write_output(Path(output), results[0].files)
    for result in results:
        click.echo(f"wrote {Path(output) / result.name if observe_all else output}", err=True)
