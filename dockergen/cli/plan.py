"""``dockergen plan``: the capacity plan of a profile (weights, KV cache, tokens per GPU,
concurrency), as a table or JSON.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from dockergen.cli.app import set_option


def _finite_gib(ctx: click.Context, param: click.Parameter, value: float) -> float:
    # click.FloatRange lets NaN through (every comparison with NaN is false) and the plan
    # cannot size memory from it: a usage error, before any work.
    if not math.isfinite(value):
        raise click.BadParameter(f"{value} is not a number of GiB; give one from 0 to 1024, "
                                 "e.g. 2")
    return value


@click.command()
@click.argument("profile", type=click.Path(dir_okay=False))
@click.option("--model-config", help="The model's config.json, or a built-in model name "
              "(default: the profile's serving.hf_config).")
@click.option("--model-dir", type=click.Path(file_okay=False, exists=True),
              help="Model folder: config.json + *.safetensors (exact weight bytes).")
@click.option("--overhead-gib", type=click.FloatRange(0, 1024), default=2.0, show_default=True,
              callback=_finite_gib,
              help="Memory besides weights and KV cache per GPU (CUDA graphs, activations).")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@set_option
def plan(profile: str, model_config: str | None, model_dir: str | None, overhead_gib: float,
         as_json: bool, overrides: tuple[str, ...]) -> None:
    """Capacity plan: weights, KV cache per token, tokens per GPU, max concurrency."""
    from dockergen.outputs.plan import builtin_models, check_fit, format_table, plan_of
    from dockergen.pipeline import resolution

    if model_config and model_dir:
        raise click.UsageError("give --model-config or --model-dir, not both")
    if model_config is not None and not model_config.strip():
        # Path("") is the working directory: the error would name "." instead of the option
        raise click.UsageError("--model-config is empty; give the model's config.json or one "
                               f"of {', '.join(sorted(builtin_models()))}")
    result, at = plan_of(resolution(Path(profile), overrides), model_config,
                         Path(model_dir) if model_dir else None, overhead_gib)
    if as_json:
        click.echo(json.dumps(result.as_dict(), indent=2, sort_keys=True))
    else:
        click.echo(format_table(result), nl=False)
    check_fit(result, at)  # the plan is printed first: it shows what would fit
