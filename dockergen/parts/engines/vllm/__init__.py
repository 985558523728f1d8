"""vLLM: ``vllm serve``, its releases, quantization methods and server flags.

Owns ``vllm/facts.yaml`` (releases with torch pin, Python range and CUDA major; quantization and
KV-cache methods with their minimum compute capability) and the mapping of the profile's
serving fields to ``vllm serve`` flags, checked against ``vllm/flags.json`` (the flags of
each release's real wheel, read by :mod:`~dockergen.parts.engines.vllm.wheel`).
Everything shared with other engines is in
:class:`~dockergen.parts.engines.base.ServingEngine`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from dockergen.parts.engines.base import ServingEngine
from dockergen.parts.engines.run import (
    CACHE,
    CONFIG,
    TMP,
    TRITON,
    ContextLimit,
    EngineRun,
    ModelContext,
)
from dockergen.parts.engines.serve import quantization_flags
from dockergen.parts.engines.vllm import wheel as vllm_wheel
from dockergen.resolve.context import Context
from dockergen.resolve.model import Derivation, ServeCommand

ARGS_SRC = "VLLM-WHEEL 0.33.0 engine/arg_utils.py"

# The model's own length, as vLLM derives it at start-up (vllm 0.33.0 wheel):
# its length keys, the smallest of those set wins, model_max_length wins over all
# (vllm/transformers_utils/model_arch_config_convertor.py:374-407
# derive_max_model_len_and_key) ...
LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
               "model_max_length", "max_target_positions", "max_sequence_length",
               "max_seq_length", "seq_len")
# ... then x the rope factor, except for the RoPE types whose max_position_embeddings is
# already the scaled length and for Gemma 3 (vllm/config/model.py:2603-2634
# _get_and_verify_max_len); a longer max_model_len is a ValueError "User-specified
# max_model_len (...) is greater than the derived max_model_len" unless it is within
# model_max_length or VLLM_ALLOW_LONG_MAX_MODEL_LEN is "1"/"true" (vllm/config/model.py:
# 2657-2683; the variable parsed in vllm/envs.py:1115-1118).
UNSCALED_ROPE = ("su", "longrope", "llama3", "yarn", "deepseek_yarn",
                 "deepseek_llama_scaling")
LIMIT_SRC = "vllm 0.33.0 vllm/config/model.py:2657 _get_and_verify_max_len"



class Vllm(ServingEngine):
    """vLLM's OpenAI-compatible server."""

    name = "vllm"
    facts_file = "serving/vllm"
    module = "vllm"
    run = EngineRun(
        health_src="vllm 0.33.0 wheel vllm/entrypoints/serve/instrumentator/health.py "
                   "@router.get('/health'): 200 once the engine answers, 503 if dead",
        caches=(TMP, CACHE, TRITON, CONFIG),
        env=(("XDG_CACHE_HOME", "{home}/.cache",
              "pin the cache root to the mounted folder (vllm/envs.py get_default_cache_root)"),
             ("XDG_CONFIG_HOME", "{home}/.config",
              "pin the config root to the mounted folder "
              "(vllm/envs.py get_default_config_root)")),
    )
    flash_attn_unneeded = "vLLM's attention uses its own bundled kernels"
    flash_attn_note = (
        "vLLM's own attention uses its bundled vllm-flash-attn, not this package; this "
        "FlashAttention-2 build serves other code in the image (e.g. transformers "
        "attn_implementation=\"flash_attention_2\")")

    # src: VLLM-WHEEL 0.33.0 engine/arg_utils.py, entrypoints/openai/cli_args.py (serve()
    # below sets each from its field); -tp and -q are the parser's short aliases
    derived_flags: ClassVar[dict[str, str]] = {
        "--model": "serving.model", "--host": "serving.host", "--port": "serving.port",
        "--served-model-name": "serving.served_model_name",
        "--max-model-len": "serving.max_model_len",
        "--gpu-memory-utilization": "serving.gpu_memory_utilization",
        "--max-num-batched-tokens": "serving.max_num_batched_tokens",
        "--max-num-seqs": "serving.max_num_seqs",
        "--tensor-parallel-size": "serving.tensor_parallel_size",
        "-tp": "serving.tensor_parallel_size",
        "--enable-chunked-prefill": "serving.enable_chunked_prefill",
        "--no-enable-chunked-prefill": "serving.enable_chunked_prefill",
        "--quantization": "quantization.weights", "-q": "quantization.weights",
        "--dtype": "quantization.weights", "--kv-cache-dtype": "quantization.kv_cache",
    }

    flag_members = vllm_wheel.MEMBERS

    def read_serve_flags(self, members: Mapping[str, bytes], shown: str) -> list[str]:
        try:
            return vllm_wheel.serve_flags(members, shown)
        except vllm_wheel.WheelLayoutError as exc:
            raise ValueError(f"{exc}: the wheel's layout is not the one dockergen reads") from None

    floor_members = vllm_wheel.QUANT_MEMBERS

    def read_floors(self, members: Mapping[str, bytes], shown: str) -> dict[str, str]:
        try:
            floors = vllm_wheel.quant_floors(members, shown)
        except vllm_wheel.WheelLayoutError as exc:
            raise ValueError(f"{exc}: the wheel's layout is not the one dockergen reads") from None
        return {method: str(row["min_cc"]) for method, row in floors.items()}

    def flag_name(self, arg: str) -> str | None:
        # vLLM's FlexibleArgumentParser reads --max_model_len as --max-model-len
        name = super().flag_name(arg)
        return "--" + name[2:].replace("_", "-") if name and name.startswith("--") else name

    def check_server_args(self, c: Context) -> None:
        """Every flag in extra_args exists in the release's `vllm serve` (from its wheel)."""
        if c.release is None:
            return
        flags = self.flag_list(c.facts, c.p.engine.version)
        removed = self.facts(c.facts).get("removed_flags", {})
        for i, arg in enumerate(c.p.serving.extra_args):
            name = self.flag_name(arg)
            if name is None or name in self.derived_flags or name in removed:
                continue  # reported by check_extra_args with a better message
            if flags is None:
                c.warn(("serving", "extra_args", i), f"{name} is not checked: there is no "
                       f"flag list for vllm {c.p.engine.version}",
                       "pin a release whose flags dockergen knows (dockergen outdated "
                       "lists them)")
                continue
            known = name in flags or (name.startswith("--no-") and "--" + name[5:] in flags)
            if not known:
                c.error(("serving", "extra_args", i), f"vllm {c.p.engine.version} has no "
                        f"{name} flag (its server would exit with 'unrecognized arguments'; "
                        f"{self.flag_source(c.facts, c.p.engine.version)})",
                        "remove it; see `vllm serve --help` of that release")

    # --- capacity: vLLM's KV-cache budget ----------------------------------------------------
    # the default --gpu-memory-utilization (src: vllm 0.33.0 vllm/config/cache.py
    # CacheConfig.gpu_memory_utilization = 0.9)
    default_utilization: ClassVar[float] = 0.9

    def kv_budget(self, mem: int, weights: int, overhead: int, utilization: float | None
                  ) -> tuple[int, float, str]:
        """The fraction of the whole GPU, less the weights and the overhead (src: vllm
        0.33.0 vllm/v1/worker/gpu_worker.py Worker.determine_available_memory)."""
        util = utilization or self.default_utilization
        return (int(mem * util) - weights - overhead, util,
                "vLLM: GPU memory x gpu_memory_utilization - weights - overhead")

    def context_limit(self, model: ModelContext, env: Mapping[str, str]
                      ) -> ContextLimit | None:
        """vLLM's derived max_model_len (see :data:`LENGTH_KEYS`, :data:`UNSCALED_ROPE`);
        None for a config without a length key, where vLLM takes any max_model_len."""
        lengths = dict(model.lengths)
        found = [(lengths[k], k) for k in LENGTH_KEYS if k in lengths]
        if not found:
            return None
        derived, key = min(found, key=lambda f: f[0])  # the first of the smallest
        if lengths.get("model_max_length"):
            derived, key = lengths["model_max_length"], "model_max_length"
        factor = 1.0
        if model.rope and "gemma3" not in model.model_type:
            for rope in model.rope:
                if rope.rope_type not in UNSCALED_ROPE and rope.factor is not None:
                    factor = rope.factor
        tokens = int(derived * factor)
        rule = f"{key}={derived}" + (f" x rope factor {factor:g}" if factor != 1 else "")
        if lengths.get("model_max_length", 0) > tokens:  # allowed up to it (model.py:2661)
            tokens = lengths["model_max_length"]
        flag = env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0").strip().lower() in ("1", "true")
        return ContextLimit(tokens, f"{rule}; {LIMIT_SRC}", "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
                            flag)

    # --- FlashInfer's precompiled kernels: the rule is the base class's ----------------------
    def flashinfer_row(self, c: Context) -> dict[str, Any] | None:
        """vllm/facts.yaml ``flashinfer``, read from each wheel's Requires-Dist
        (tests/unit/knowledge/test_vllm_quant.py compares): the flashinfer-python pin, whether the
        wheel pulls flashinfer-cubin itself, and whether PyPI has that cubin; releases that pull
        FlashInfer only through an extra take none."""
        row = self.facts(c.facts).get("flashinfer", {}).get(c.p.engine.version)
        return None if not row or row.get("extra_only") else dict(row)

    def extra_env(self, c: Context) -> dict[str, str]:
        return {"VLLM_NO_USAGE_STATS": "1"}  # air-gapped fleets: no usage-stats phone-home

    def serve(self, c: Context, d: list[Derivation]) -> ServeCommand:
        p = c.p
        s = p.serving
        args: list[str] = [s.model]
        d.append(Derivation("serve MODEL", s.model, "from serving.model (the positional "
                            "model argument of vllm serve)", ARGS_SRC))

        def flag(name: str, value: object, source: str) -> None:
            args.extend([name, str(value)])
            d.append(Derivation(f"serve {name}", str(value), f"from {source}", ARGS_SRC))

        flag("--host", s.host, "serving.host")
        flag("--port", s.port, "serving.port")
        if s.served_model_name:
            flag("--served-model-name", s.served_model_name, "serving.served_model_name")
        if s.max_model_len is not None:
            flag("--max-model-len", s.max_model_len, "serving.max_model_len")
        if s.gpu_memory_utilization is not None:
            flag("--gpu-memory-utilization", s.gpu_memory_utilization,
                 "serving.gpu_memory_utilization")
        if s.max_num_batched_tokens is not None:
            flag("--max-num-batched-tokens", s.max_num_batched_tokens,
                 "serving.max_num_batched_tokens")
        if s.max_num_seqs is not None:
            flag("--max-num-seqs", s.max_num_seqs, "serving.max_num_seqs")
        flag("--tensor-parallel-size", s.tensor_parallel_size, "serving.tensor_parallel_size")
        if s.enable_chunked_prefill is not None:
            name = "--enable-chunked-prefill" if s.enable_chunked_prefill else (
                "--no-enable-chunked-prefill")
            args.append(name)
            d.append(Derivation(f"serve {name}", "", "from serving.enable_chunked_prefill",
                                "VLLM-WHEEL 0.33.0 SchedulerConfig"))
        quantization_flags(self, c, d, flag, "vLLM")
        args.extend(self.extra_args(c, d, ARGS_SRC))
        return ServeCommand(("vllm", "serve"), tuple(args))


ENGINE = Vllm()
