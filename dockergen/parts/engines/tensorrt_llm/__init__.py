"""TensorRT-LLM: ``trtllm-serve`` with the PyTorch backend, its releases and options.

Owns ``tensorrt_llm/facts.yaml`` (releases, NVIDIA's wheel index, the MPI runtime package,
quantization rows) and the mapping of the profile's serving fields to ``trtllm-serve``
flags and the LLM API options file (``llm_api_options.yaml`` in the build context).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from dockergen.parts.engines.base import ServingEngine
from dockergen.parts.engines.identity import OPTIONS_DIR
from dockergen.parts.engines.run import (
    CACHE,
    CONFIG,
    PIN_CACHE_ROOT,
    PIN_CONFIG_ROOT,
    TMP,
    TRITON,
    ContextLimit,
    EngineRun,
    ModelContext,
)
from dockergen.resolve.context import Context
from dockergen.resolve.model import Derivation, ServeCommand

LLM_API_OPTIONS = "llm_api_options.yaml"
SERVE_SRC = "doc:nvidia.github.io/TensorRT-LLM commands/trtllm-serve"


# The PyTorch backend's longest sequence at start-up: max_position_embeddings (2048 when the
# config has none) x the rope factor, unless the RoPE type is one whose
# max_position_embeddings is already the scaled length; a longer --max_seq_len is not
# refused but lowered to it, with a warning ("Specified self.max_seq_len=... is larger than
# what the model can support (...). Setting max_seq_len to ..."). Read from NVIDIA/
# TensorRT-LLM's source as the code index stores it, in every stored version of the two
# functions (from 1.0.0rc4, commit 000a01d, to 1.2.0rc2, commit b35ac1b, and newer ones,
# which add an opt-out); the v1.1.0 tag itself is not stored, so no line is cited: the
# functions are named.
UNSCALED_ROPE = ("su", "longrope", "llama3", "yarn")
LIMIT_SRC = ("TRTLLM:tensorrt_llm/_torch/models/modeling_utils.py "
             "DecoderModelForCausalLM.infer_max_seq_len (Steps 1-3) and "
             "tensorrt_llm/_torch/pyexecutor/model_engine.py "
             "PyTorchModelEngine._init_max_seq_len (lowers a longer max_seq_len)")


class TensorrtLlm(ServingEngine):
    """TensorRT-LLM's OpenAI-compatible ``trtllm-serve``."""

    name = "tensorrt-llm"
    facts_file = "serving/tensorrt_llm"
    module = "tensorrt_llm"
    run = EngineRun(
        health_src="doc:nvidia.github.io/TensorRT-LLM commands/trtllm-serve (endpoints "
                   "/health, /metrics, /version; engines-compat.md 3.5)",
        # The PyTorch backend uses torch inductor, Triton and FlashInfer like vLLM
        # (TRTLLM requirements.txt: triton, flashinfer-python); the tensorrt_llm wheel is
        # not on PyPI, so a TensorRT-LLM-specific cache path is not verified here.
        caches=(TMP, CACHE, TRITON, CONFIG),
        env=(PIN_CACHE_ROOT, PIN_CONFIG_ROOT),
    )
    imports_need_gpu = True  # loads libcuda at import time
    # src: doc:nvidia.github.io/TensorRT-LLM commands/trtllm-serve (serve() below sets each)
    derived_flags: ClassVar[dict[str, str]] = {
        "--host": "serving.host", "--port": "serving.port",
        "--backend": "the engine (dockergen serves with the PyTorch backend)",
        "--tp_size": "serving.tensor_parallel_size", "--max_seq_len": "serving.max_model_len",
        "--max_num_tokens": "serving.max_num_batched_tokens",
        "--max_batch_size": "serving.max_num_seqs",
        "--kv_cache_free_gpu_memory_fraction": "serving.gpu_memory_utilization",
        "--extra_llm_api_options": "quantization.kv_cache and serving.enable_chunked_prefill "
                                   "(dockergen writes the options file)",
    }

    # kv_cache_free_gpu_memory_fraction's default (src: doc:nvidia.github.io/TensorRT-LLM
    # trtllm-serve), a fraction of the memory left after the weights
    default_utilization: ClassVar[float] = 0.9

    def kv_budget(self, mem: int, weights: int, overhead: int, utilization: float | None
                  ) -> tuple[int, float, str]:
        """The fraction of what the weights and the overhead leave free."""
        util = utilization or self.default_utilization
        return (int((mem - weights - overhead) * util), util,
                "TensorRT-LLM: kv_cache_free_gpu_memory_fraction x (GPU memory - weights - "
                "overhead)")

    def context_limit(self, model: ModelContext, env: Mapping[str, str]
                      ) -> ContextLimit | None:
        """TensorRT-LLM's inferred max_seq_len (see :data:`UNSCALED_ROPE`); a longer
        max_model_len is lowered to it at start-up, never refused."""
        base = dict(model.lengths).get("max_position_embeddings", 2048)
        factor = 1.0
        if model.rope and not model.rope_nested:  # nested sets: no top-level factor
            rope = model.rope[0]
            if rope.rope_type not in UNSCALED_ROPE and rope.factor is not None:
                factor = rope.factor
        tokens = math.ceil(base * factor)
        rule = (f"max_position_embeddings={base}" + (f" x rope factor {factor:g}"
                                                     if factor != 1 else ""))
        return ContextLimit(tokens, f"{rule}; {LIMIT_SRC}", "", False,
                            f"does not refuse it but starts with max_seq_len {tokens} "
                            "instead (a warning in its log), so the length the profile asks "
                            "for is never served", lowers=True)

    def check_extra_args(self, c: Context) -> None:
        """Also: serving.served_model_name has no trtllm-serve flag we can vouch for."""
        super().check_extra_args(c)
        if c.p.serving.served_model_name is not None:
            # The 1.x trtllm-serve options documented for 0.18/0.19 have no served-model-name
            # flag; a newer CLI mirror lists --served_model_name (engines-compat.md 3.5,
            # unverified for 1.1.0). Silently dropping it made the GPU smoke check ask for a
            # name the server never had, so it is refused instead.
            c.error(("serving", "served_model_name"), "trtllm-serve (TensorRT-LLM "
                    f"{c.p.engine.version}) has no verified flag for a served model name; "
                    "the server names the model by its MODEL argument (serving.model)",
                    "remove serving.served_model_name; clients use the serving.model value "
                    "as the model name")

    def serve(self, c: Context, d: list[Derivation]) -> ServeCommand:
        s, q = c.p.serving, c.p.quantization
        args: list[str] = [s.model, "--host", s.host, "--port", str(s.port), "--backend",
                           "pytorch", "--tp_size", str(s.tensor_parallel_size)]
        d.append(Derivation("serve MODEL", s.model, "from serving.model (the positional "
                            "MODEL argument of trtllm-serve)", SERVE_SRC))
        d.append(Derivation("serve --host", s.host, "from serving.host", SERVE_SRC))
        d.append(Derivation("serve --port", str(s.port), "from serving.port", SERVE_SRC))
        d.append(Derivation("serve --backend", "pytorch", "the default LLM backend since 1.0",
                            SERVE_SRC))
        d.append(Derivation("serve --tp_size", str(s.tensor_parallel_size),
                            "from serving.tensor_parallel_size", SERVE_SRC))
        d.append(Derivation("served model name", s.model, "trtllm-serve names the model by its "
                            "MODEL argument (no served-model-name flag)", SERVE_SRC))
        mapping = (("--max_seq_len", s.max_model_len, "serving.max_model_len"),
                   ("--max_num_tokens", s.max_num_batched_tokens,
                    "serving.max_num_batched_tokens"),
                   ("--max_batch_size", s.max_num_seqs, "serving.max_num_seqs"),
                   ("--kv_cache_free_gpu_memory_fraction", s.gpu_memory_utilization,
                    "serving.gpu_memory_utilization (closest equivalent: fraction of the "
                    "memory left after weights that the KV cache may take)"))
        for name, value, source in mapping:
            if value is not None:
                args.extend([name, str(value)])
                d.append(Derivation(f"serve {name}", str(value), f"from {source}", SERVE_SRC))
        options: dict[str, Any] = {}
        if q.kv_cache != "auto":
            options["kv_cache_config"] = {"dtype": q.kv_cache}
        if s.enable_chunked_prefill is not None:
            options["enable_chunked_prefill"] = s.enable_chunked_prefill
        files: dict[str, bytes] = {}
        if options:
            args.extend(["--extra_llm_api_options", f"{OPTIONS_DIR}/{LLM_API_OPTIONS}"])
            d.append(Derivation("serve --extra_llm_api_options", json.dumps(
                options, sort_keys=True), "kv cache dtype / chunked prefill are LLM API "
                "options, not trtllm-serve flags", SERVE_SRC))
            files[LLM_API_OPTIONS] = _options_yaml(options)
        if q.weights not in ("auto", "fp16", "bf16"):
            d.append(Derivation("weights", q.weights, "TensorRT-LLM reads the quantization of "
                                "a ModelOpt-quantized checkpoint (hf_quant_config.json); serve "
                                "a checkpoint made with quantize.py --qformat",
                                "TRTLLM:examples/quantization/quantize.py@059c97c"))
        args.extend(self.extra_args(c, d, SERVE_SRC))
        return ServeCommand(("trtllm-serve",), tuple(args), files)


def _options_yaml(options: dict[str, Any]) -> bytes:
    lines = ["# Generated by dockergen: TensorRT-LLM LLM API options (--extra_llm_api_options)"]
    for key in sorted(options):
        value = options[key]
        if isinstance(value, dict):
            lines.append(f"{key}:")
            lines.extend(f"  {k}: {json.dumps(v)}" for k, v in sorted(value.items()))
        else:
            lines.append(f"{key}: {json.dumps(value)}")
    return ("\n".join(lines) + "\n").encode()


ENGINE = TensorrtLlm()
