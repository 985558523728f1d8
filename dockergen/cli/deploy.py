"""``dockergen deploy``: a hardened Compose file or Kubernetes manifest for a profile (or
for every shipped one).
"""

from __future__ import annotations

from pathlib import Path

import click

from dockergen.cli import params
from dockergen.cli.app import (
    path_given,
    quiet_option,
    refuse_other_format,
    set_option,
    to_stdout,
    warn,
)
from dockergen.outputs import kube


@click.command()
@click.argument("profile", required=False, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=params.DEPLOY_FORMAT, required=True,
              help="compose: a Compose file; k8s: Deployment + Service.")
@click.option("--record", type=click.Path(dir_okay=False),
              help="build-record.json of `dockergen build --push`: pin the image by digest.")
@click.option("-o", "--output", type=click.Path(), callback=path_given,
              help="Write to this file (with --all: a folder, OUTPUT/<name>/FILE).")
@click.option("--all", "deploy_all", is_flag=True, help="Every shipped profile (examples).")
@click.option("--opt-in", "opt_in", multiple=True,
              type=params.OPT_IN,
              help="Allow a host-sharing or raised-limit setting (prints a warning).")
@click.option("--gpu-ids", help="Compose: explicit GPU indexes, UUIDs (GPU-...) or MIG devices "
              "(MIG-...), comma-separated (default: a count of tensor_parallel_size).")
@click.option("--bind", "bind_address", default="127.0.0.1", show_default=True,
              help="Compose: host IP address the port is published on.")
@click.option("--namespace", default=kube.DEFAULT_NAMESPACE, show_default=True,
              help="Kubernetes namespace (an RFC 1123 label).")
@click.option("--runtime-class", help="Kubernetes runtimeClassName (e.g. nvidia).")
@click.option("--hf-secret", default="hf-token", show_default=True,
              help="Kubernetes secret holding HF_TOKEN under key 'token' (its name, never the "
                   "token).")
@click.option("--model-claim", help="Kubernetes PVC of the model (default <name>-model).")
@click.option("--cpus", type=click.IntRange(1, 1024), default=8, show_default=True,
              help="Kubernetes: CPU request and limit.")
@click.option("--memory-gib", type=click.IntRange(1, 65536), default=64, show_default=True,
              help="Kubernetes: memory request and limit in GiB.")
@click.option("--openshift", is_flag=True,
              help="Kubernetes: OpenShift's restricted-v2 SCC assigns the UID, GID 0 and "
                   "fsGroup; the pod fixes none of them.")
@click.option("--require-signature", "require_signature", metavar="KEY",
              help="Kubernetes: add a Sigstore policy-controller ClusterImagePolicy that "
                   "admits the image only with a cosign signature verified by KEY (a public "
                   "key file such as cosign.pub, or a KMS reference).")
@set_option
@quiet_option
@click.pass_context
def deploy(ctx: click.Context, profile: str | None, fmt: str, record: str | None,
           output: str | None, deploy_all: bool, opt_in: tuple[str, ...], gpu_ids: str | None,
           bind_address: str, namespace: str, runtime_class: str | None, hf_secret: str,
           model_claim: str | None, cpus: int, memory_gib: int, openshift: bool,
           require_signature: str | None, overrides: tuple[str, ...], quiet: bool) -> None:
    """Write a hardened Compose file or Kubernetes manifest for PROFILE."""
    from dockergen.api import shipped_single_images
    from dockergen.files import atomic
    from dockergen.outputs.deploy import DeployOptions, DeployUsageError, check_options, deploy
    from dockergen.outputs.deploy.write import folder_files, is_deploy_folder, is_generated

    if deploy_all == bool(profile):
        raise click.UsageError("give either PROFILE or --all")
    if deploy_all and (to_stdout(output) or record):
        raise click.UsageError("--all needs -o DIR and takes no --record")
    refuse_other_format(ctx, fmt, _DEPLOY_FORMAT_OPTIONS)
    options = DeployOptions(
        record=Path(record) if record else None, opt_in=opt_in,
        # blanks are kept so `--gpu-ids 0,,1` is refused, not read as 0,1
        gpu_ids=tuple(gpu_ids.split(",")) if gpu_ids is not None else (),
        bind_address=bind_address, namespace=namespace, runtime_class=runtime_class,
        hf_secret=hf_secret, model_claim=model_claim, cpus=cpus, memory_gib=memory_gib,
        openshift=openshift, require_signature=require_signature)
    try:
        check_options(options)  # before any profile is read
    except DeployUsageError as exc:
        raise click.UsageError(str(exc)) from None
    # one image per profile: a matrix profile's variants are not deployed yet
    paths = shipped_single_images() if deploy_all else [Path(profile or "")]
    from dockergen.pipeline import resolution

    outputs = [deploy(resolution(p, overrides), fmt, options) for p in paths]
    for out in outputs:
        warn(out.warnings, quiet)
    if deploy_all:
        # the whole folder at once, as `render`/`observe -o` write theirs: every profile's
        # file appears, or nothing changes
        folder = Path(output or "")
        atomic.write_folder(folder, folder_files(folder, outputs), kind="deploy",
                            legacy=lambda f, names: is_deploy_folder(f))
        for out in outputs:
            click.echo(f"wrote {folder / out.name / out.filename}", err=True)
    elif not to_stdout(output):
        atomic.write_file(Path(output or ""), outputs[0].text, ours=is_generated)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(outputs[0].text, nl=False)


# (parameter, option, the --format it belongs to)
_DEPLOY_FORMAT_OPTIONS = (
    ("gpu_ids", "--gpu-ids", "compose"), ("bind_address", "--bind", "compose"),
    ("namespace", "--namespace", "k8s"), ("runtime_class", "--runtime-class", "k8s"),
    ("hf_secret", "--hf-secret", "k8s"), ("model_claim", "--model-claim", "k8s"),
    ("cpus", "--cpus", "k8s"), ("memory_gib", "--memory-gib", "k8s"),
    ("openshift", "--openshift", "k8s"), ("require_signature", "--require-signature", "k8s"),
)
