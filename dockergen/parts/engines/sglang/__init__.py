"""SGLang: ``sglang serve``, its releases, kernels pinned in lockstep, and its server flags.

Owns ``sglang/facts.yaml`` (releases with torch pin, Python range, CUDA major, the sglang-kernel
and FlashInfer pins, whether a release pulls FlashInfer's kernels; quantization rows read
from the wheel's quantization configs; the health endpoint; the run-time C compiler Triton
needs) and ``sglang/flags.json`` (every
option string of ``sglang serve`` per release, extracted from the real wheel by
``tools/sglang_flags.py``). Maps the profile's serving fields to ``sglang serve`` flags and
checks every flag of the server command, derived or extra, against the release's list.

SGLang does not use Dao-AILab's flash-attn: FA3 ships prebuilt in sglang-kernel and FA4 is
the pure-Python flash-attn-4 (SGLANG-WHEEL 0.5.23 METADATA; ``from flash_attn`` only in
fallbacks for GPUs other than sm8x/sm9x and in the diffusion runtime), so a FlashAttention-2
source build is flagged as a multi-hour compile the server does not use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dockergen.parts.engines.base import ServingEngine
from dockergen.parts.engines.run import (
    PIN_CACHE_ROOT,
    TMP,
    TRITON,
    CacheDir,
    ContextLimit,
    EngineRun,
    ModelContext,
)
from dockergen.parts.engines.serve import EXTRA_ARGS_REASON, quantization_flags
from dockergen.resolve.context import Context
from dockergen.resolve.model import Derivation, ServeCommand

# The model's own context length, as SGLang derives it at start-up (sglang 0.5.23 wheel,
# sglang/srt/utils/hf_transformers/common.py:668-694 get_context_length): the first of its
# keys that the config sets, x the rope factor unless the rope parameters carry
# original_max_position_embeddings or are llama3, 2048 without any key. The parameters are
# transformers' rope_parameters (transformers 5.19.0, SGLang's pin:
# configuration_utils.py:585 rope_scaling returns rope_parameters). A longer
# --context-length is a ValueError unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN parses
# true (srt/configs/model_config.py:1293-1316 _derive_context_length; srt/environ.py:144
# EnvBool: true, 1, yes, y).
CONTEXT_LENGTH_KEYS = ("max_sequence_length", "seq_length", "max_seq_len",
                       "model_max_length", "max_position_embeddings")
LIMIT_SRC = ("sglang 0.5.23 sglang/srt/configs/model_config.py:1296 "
             "_derive_context_length")

# SGLang's cache root holds its own caches beside the shared ones
_CACHE = CacheDir(
    "cache", "{home}/.cache",
    "HF_HOME (huggingface); SGLang's SGLANG_CACHE_DIR ~/.cache/sglang (DeepGEMM and JIT "
    "kernel caches); FlashInfer JIT (~/.cache/flashinfer)",
    "huggingface_hub 2.4.0 wheel constants.py HF_HOME; sglang 0.5.23 wheel "
    "sglang/srt/environ.py SGLANG_CACHE_DIR = expanduser('~/.cache/sglang'), "
    "SGLANG_DG_CACHE_DIR / SGLANG_JIT_CACHE_DIR under it; flashinfer-python wheel "
    "flashinfer/jit/env.py FLASHINFER_CACHE_DIR", loads_code=True)

ARGS_SRC = "SGLANG-WHEEL {version} sglang/srt/arg_groups/fields/*.py (sglang/flags.json)"



class Sglang(ServingEngine):
    """SGLang's OpenAI-compatible server (``sglang serve``)."""

    name = "sglang"
    facts_file = "serving/sglang"
    module = "sglang"
    lockstep_pins = {"kernel": "sglang-kernel", "flashinfer": "flashinfer-python"}
    run = EngineRun(
        health_src="sglang 0.5.23 wheel srt/entrypoints/http_server.py:721 (one-token "
                   "generation; 503 while loading); dockergen/parts/engines/sglang/"
                   "facts.yaml",
        caches=(TMP, _CACHE, TRITON),
        env=(PIN_CACHE_ROOT,),
    )
    flash_attn_note = (
        "SGLang does not use Dao-AILab flash-attn (its FA3 kernels ship prebuilt in "
        "sglang-kernel, FA4 is the pure-Python flash-attn-4); this FlashAttention-2 build "
        "only serves other code in the image")


    def flashinfer_row(self, c: Context) -> dict[str, Any] | None:
        """The release's flashinfer-python pin (its row), with sglang/facts.yaml
        ``flashinfer_kernels``: whether the wheel pulls flashinfer-cubin, and the cubin
        versions PyPI has."""
        if c.release is None:
            return None
        kernels = self.facts(c.facts)["flashinfer_kernels"]
        version = str(c.release["flashinfer"]).split("==", 1)[1]
        return {"python": version, "cubin": bool(kernels["pulled_by_release"]),
                "cubin_on_pypi": version in kernels["cubin_on_pypi"], "src": kernels["src"]}

    def own_requirements(self, c: Context) -> tuple[str, ...]:
        """sglang, then sglang-kernel and flashinfer-python pinned as its wheel pins them."""
        if c.release is None:  # unknown release: reported by the engine check; no lockstep pins
            return (f"sglang=={c.p.engine.version}",)
        return (f"sglang=={c.p.engine.version}", c.release["kernel"], c.release["flashinfer"])

    def kv_budget(self, mem: int, weights: int, overhead: int, utilization: float | None
                  ) -> tuple[int, float, str]:
        """--mem-fraction-static: "the fraction of the memory used for static allocation
        (model weights and KV cache memory pool)" (sglang 0.5.23 wheel
        srt/arg_groups/fields/schedule.py); activations and CUDA graphs use the rest.
        Unset, SGLang reserves memory by a heuristic (srt/arg_groups/memory_hook.py
        reserved_mem); dockergen reserves its overhead estimate instead."""
        util = utilization if utilization is not None else round((mem - overhead) / mem, 4)
        return int(mem * util) - weights, util, "SGLang: GPU memory x mem_fraction_static - weights"

    def context_limit(self, model: ModelContext, env: Mapping[str, str]
                      ) -> ContextLimit | None:
        """SGLang's derived context length (see :data:`CONTEXT_LENGTH_KEYS`)."""
        lengths = dict(model.lengths)
        factor = 1.0
        if model.rope and not model.rope_nested:  # nested sets have no top-level factor
            rope = model.rope[0]
            if rope.factor is not None and not rope.has_original and rope.rope_type != "llama3":
                factor = rope.factor
        key = next((k for k in CONTEXT_LENGTH_KEYS if k in lengths), None)
        base = lengths[key] if key else 2048
        rule = (f"{key}={base}" if key else "no length key: 2048") + (
            f" x rope factor {factor:g}" if factor != 1 else "")
        flag = env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "").lower() in (
            "true", "1", "yes", "y")
        return ContextLimit(int(factor * base), f"{rule}; {LIMIT_SRC}",
                            "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", flag)

    def check_scheduler(self, c: Context) -> None:
        """No start-up refusal of SGLang's scheduler is known; vLLM's rules do not apply."""

    def check_server_args(self, c: Context) -> None:
        """Every flag of the server command exists in the release (from its real wheel), and
        ``serving.extra_args`` never repeats a flag the profile already sets."""
        flags = self.flag_list(c.facts, c.p.engine.version)
        if c.release is None:
            return
        if flags is None:
            c.error(("engine", "version"), f"no flag list for sglang {c.p.engine.version}",
                    "pin a release whose flags dockergen knows (dockergen outdated lists "
                    "them)")
            return
        derived: dict[str, str | None] = {}  # flag -> the profile field that sets it
        for d in self._derivations(c):  # the profile's own extra_args are checked below
            if d.key.startswith("serve --") and not d.reason.startswith(EXTRA_ARGS_REASON):
                derived[d.key[len("serve "):]] = (d.reason[5:].split(" ")[0].split("=")[0]
                                                  if d.reason.startswith("from ") else None)
        for name in sorted(derived):
            if name not in flags:  # a mapping this release does not have
                c.error(("engine", "version"), f"sglang {c.p.engine.version} has no {name} "
                        f"flag, which dockergen derives from {derived[name] or 'the profile'}",
                        "use a release that has it, or unset that field")
        aliases = self.facts(c.facts).get("flag_aliases", {})
        for i, arg in enumerate(c.p.serving.extra_args):
            name = arg.split("=", 1)[0]
            if not name.startswith("--"):
                continue
            if name not in flags:
                c.error(("serving", "extra_args", i), f"sglang {c.p.engine.version} has no "
                        f"{name} flag (its server would exit with 'unrecognized arguments')",
                        "remove it; see `sglang serve --help` of that release")
            elif aliases.get(name, name) in derived:
                field = derived[aliases.get(name, name)]
                if field is None:
                    c.error(("serving", "extra_args", i), f"{name} is always passed by "
                            "dockergen", "remove it from serving.extra_args")
                else:
                    c.error(("serving", "extra_args", i), f"{name} is set by {field}; here it "
                            "would silently override the profile", f"set {field} instead")

    def _derivations(self, c: Context) -> list[Derivation]:
        d: list[Derivation] = []
        self.serve(c, d)
        return d

    def serve(self, c: Context, d: list[Derivation]) -> ServeCommand:
        p = c.p
        s = p.serving
        src = ARGS_SRC.format(version=p.engine.version)
        args: list[str] = []

        def flag(name: str, value: object, source: str) -> None:
            args.extend([name, str(value)])
            d.append(Derivation(f"serve {name}", str(value), f"from {source}", src))

        flag("--model-path", s.model, "serving.model")
        flag("--host", s.host, "serving.host (SGLang's own default is 127.0.0.1)")
        flag("--port", s.port, "serving.port")
        if s.served_model_name:
            flag("--served-model-name", s.served_model_name, "serving.served_model_name")
        if s.max_model_len is not None:
            flag("--context-length", s.max_model_len, "serving.max_model_len")
        if s.gpu_memory_utilization is not None:
            flag("--mem-fraction-static", s.gpu_memory_utilization,
                 "serving.gpu_memory_utilization (closest equivalent: the fraction of GPU "
                 "memory for weights and KV cache)")
        if s.max_num_seqs is not None:
            flag("--max-running-requests", s.max_num_seqs, "serving.max_num_seqs")
        if s.enable_chunked_prefill is False:
            flag("--chunked-prefill-size", -1, "serving.enable_chunked_prefill: false (-1 "
                 "disables chunked prefill)")
            if s.max_num_batched_tokens is not None:
                flag("--max-prefill-tokens", s.max_num_batched_tokens,
                     "serving.max_num_batched_tokens (the prefill batch budget)")
        elif s.max_num_batched_tokens is not None:
            flag("--chunked-prefill-size", s.max_num_batched_tokens,
                 "serving.max_num_batched_tokens (the per-step prefill budget)")
        if s.enable_chunked_prefill:  # explain says what the profile set, even with no flag
            d.append(Derivation("chunked prefill", "on", "serving.enable_chunked_prefill: true "
                                "is SGLang's default (a positive --chunked-prefill-size)", src))
        flag("--tp-size", s.tensor_parallel_size, "serving.tensor_parallel_size")
        quantization_flags(self, c, d, flag, "SGLang")
        args.append("--enable-metrics")  # /metrics exists only with it
        d.append(Derivation("serve --enable-metrics", "", "always passed: SGLang serves "
                            "Prometheus metrics on its port only with this flag", src))
        args.extend(self.extra_args(c, d, src))
        return ServeCommand(("sglang", "serve"), tuple(args))


ENGINE = Sglang()
