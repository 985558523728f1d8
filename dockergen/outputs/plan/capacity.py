"""The plan itself: weights per GPU, the KV-cache budget (the serving engine's own rule),
tokens per GPU, the largest max_model_len and the concurrency that fit, and the checks
that refuse a profile whose model does not fit.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from dockergen.errors import Location, Problem, ProfileError
from dockergen.knowledge.models import GIB, ModelShape, PlanError
from dockergen.outputs.plan.counts import count_params, kv_bytes_per_token_layer

if TYPE_CHECKING:  # the engines load on first use (the registry imports every engine)
    from dockergen.parts.engines.run import ContextLimit

# vLLM's KV block: 16 tokens (src: vllm/config/cache.py CacheConfig.block_size default on
# CUDA; the sliding-window bound adds one block).
BLOCK_SIZE = 16
# Memory besides weights and KV cache: CUDA graphs, activations of the profiling run,
# NCCL buffers, allocator slack. vLLM measures it with a profiling run at start-up
# (src: vllm/v1/worker/gpu_worker.py Worker.determine_available_memory: KV budget =
# requested_memory (total x gpu_memory_utilization) - weights - peak activation -
# non-torch memory - CUDA graph memory); without a GPU dockergen reserves this estimate
# (dockergen's assumption, adjustable with --overhead-gib).
DEFAULT_OVERHEAD_GIB = 2.0

# Bytes per element of the weight and KV-cache precisions (int4: 0.5, scales ignored).
WEIGHT_BYTES = {"fp32": 4.0, "float32": 4.0, "bf16": 2.0, "bfloat16": 2.0, "fp16": 2.0,
                "float16": 2.0, "fp8": 1.0, "int8": 1.0, "int4-awq": 0.5, "gptq": 0.5}


@dataclass(frozen=True)
class PlanInputs:
    """What the plan needs from the profile (see :func:`inputs_from_profile`)."""

    engine: str
    gpu_names: tuple[str, ...]
    gpu_mem_gib: float  # the smallest of the targets
    weights: str  # quantization.weights
    kv_cache: str  # quantization.kv_cache
    tensor_parallel: int
    max_model_len: int | None
    gpu_memory_utilization: float | None
    max_num_batched_tokens: int | None
    env: tuple[tuple[str, str], ...] = ()  # serving.env: an engine may read its limits there


@dataclass
class Plan:
    """The capacity plan; every number in bytes or tokens (``as_dict`` for --json)."""

    model: str
    model_source: str
    attention: str
    engine: str
    gpu: str
    gpu_memory_bytes: int
    tensor_parallel: int
    weight_dtype: str
    weight_bytes_total: int
    weight_bytes_source: str
    weight_bytes_per_gpu: int
    kv_cache_dtype: str
    kv_bytes_per_token: int  # all layers, one replica (tp=1 view)
    kv_bytes_per_token_per_gpu: int  # growing (full-attention) layers on one GPU
    sliding_bytes_per_token_per_gpu: int  # bounded (sliding-window) layers on one GPU
    sliding_window: int
    gpu_memory_utilization: float
    overhead_bytes: int
    overhead_source: str
    kv_budget_bytes_per_gpu: int
    max_model_len: int
    model_max_len: int  # the model's own limit, as the engine derives it at start-up
    model_max_len_rule: str  # how the engine derives it (with the source it mirrors)
    model_max_len_enforced: bool  # the engine refuses (or lowers) a longer max_model_len
    bytes_per_request_per_gpu: int
    tokens_per_gpu: int
    max_concurrency: float
    fits: bool
    largest_max_model_len: int
    smallest_tensor_parallel: int | None
    formula: str
    notes: list[str] = field(default_factory=list)
    # what the engine does with a longer max_model_len (its ContextLimit.beyond)
    model_max_len_beyond: str = "refuses it at start-up"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _weight_dtype(m: ModelShape, weights: str) -> str:
    if weights in ("auto", ""):
        return m.dtype
    return weights


def _kv_dtype(m: ModelShape, weights: str, kv_cache: str) -> tuple[str, int]:
    # vLLM --kv-cache-dtype auto = the model dtype (src: vllm/utils/torch_utils.py
    # kv_cache_dtype_str_to_dtype); fp8 weights do not make the KV cache fp8.
    if kv_cache in ("fp8", "int8"):
        return kv_cache, 1
    dtype = m.dtype if weights in ("auto", "fp8", "int8", "int4-awq", "gptq") else weights
    return dtype, int(WEIGHT_BYTES.get(dtype, 2.0))


def _request_bytes(m: ModelShape, full_pt: int, slide_pt: int, length: int,
                   batched: int) -> int:
    """KV bytes one request of ``length`` tokens holds on one GPU (vLLM's admission bound)."""
    full = math.ceil(length / BLOCK_SIZE) * BLOCK_SIZE * full_pt
    if not slide_pt:
        return full
    held = min(m.sliding_window - 1 + batched, length)
    return full + (math.ceil(held / BLOCK_SIZE) + 1) * BLOCK_SIZE * slide_pt


def make_plan(m: ModelShape, inp: PlanInputs, weight_total: int | None = None,
              weight_source: str = "", overhead_gib: float = DEFAULT_OVERHEAD_GIB) -> Plan:
    """Compute the plan for one tensor-parallel size (the profile's)."""
    return _plan(m, inp, inp.tensor_parallel, weight_total, weight_source, overhead_gib,
                 search=True)


def _plan(m: ModelShape, inp: PlanInputs, tp: int, weight_total: int | None,
          weight_source: str, overhead_gib: float, search: bool) -> Plan:
    wdtype = _weight_dtype(m, inp.weights)
    if weight_total is None:
        weight_total, weight_source = _estimated_weights(m, wdtype)
    kv_name, kv_bytes = _kv_dtype(m, inp.weights, inp.kv_cache)
    per_layer_tp1 = kv_bytes_per_token_layer(m, kv_bytes, 1)
    per_layer = kv_bytes_per_token_layer(m, kv_bytes, tp)
    full_layers = m.layers - m.sliding_layers
    full_pt = per_layer * full_layers
    slide_pt = per_layer * m.sliding_layers
    mem = int(inp.gpu_mem_gib * GIB)
    overhead = int(overhead_gib * GIB)
    w_gpu = math.ceil(weight_total / tp)
    budget, util, budget_rule = _kv_budget(inp, mem, w_gpu, overhead)
    limit = _model_limit(m, inp)
    max_len = inp.max_model_len or limit.tokens  # the engines' default: the model's own
    batched = inp.max_num_batched_tokens or max_len
    need = _request_bytes(m, full_pt, slide_pt, max_len, batched)
    fits = need <= budget and budget > 0
    largest = _largest_max_model_len(m, full_pt, slide_pt, limit.tokens,
                                     inp.max_num_batched_tokens, budget)
    tokens = budget // full_pt if full_pt else 0
    concurrency = round(budget / need, 2) if need else 0.0
    smallest_tp: int | None = tp if fits else None
    if search and not fits:
        smallest_tp = _smallest_fitting_tp(m, inp, tp, weight_total, weight_source,
                                           overhead_gib)
    notes = [f"KV budget: {budget_rule}"]
    if not m.kv_lora_rank and m.kv_heads < tp:
        notes.append(f"{m.kv_heads} KV heads < tensor_parallel_size {tp}: each rank keeps "
                     "one replicated KV head")
    return Plan(
        model=m.name, model_source=m.source, attention=m.attention, engine=inp.engine,
        gpu="/".join(inp.gpu_names), gpu_memory_bytes=mem, tensor_parallel=tp,
        weight_dtype=wdtype, weight_bytes_total=weight_total,
        weight_bytes_source=weight_source, weight_bytes_per_gpu=w_gpu,
        kv_cache_dtype=kv_name, kv_bytes_per_token=per_layer_tp1 * m.layers,
        kv_bytes_per_token_per_gpu=full_pt, sliding_bytes_per_token_per_gpu=slide_pt,
        sliding_window=m.sliding_window, gpu_memory_utilization=util,
        overhead_bytes=overhead,
        overhead_source=("dockergen estimate (CUDA graphs, activations, NCCL); vLLM measures "
                         "it at start-up: vllm/v1/worker/gpu_worker.py "
                         "determine_available_memory"),
        kv_budget_bytes_per_gpu=budget, max_model_len=max_len,
        model_max_len=limit.tokens, model_max_len_rule=limit.rule,
        model_max_len_enforced=limit.lowers or (not limit.overridden
                                                and limit.override_env != ""),
        model_max_len_beyond=limit.beyond,
        bytes_per_request_per_gpu=need, tokens_per_gpu=int(tokens),
        max_concurrency=concurrency, fits=fits, largest_max_model_len=largest,
        smallest_tensor_parallel=smallest_tp, formula=_kv_formula(m, kv_bytes, full_layers),
        notes=notes)


def _estimated_weights(m: ModelShape, wdtype: str) -> tuple[int, str]:
    """(weight bytes, how they were counted) from the config shapes, without a checkpoint."""
    per = WEIGHT_BYTES.get(wdtype)
    if per is None:
        raise PlanError(f"{m.source}: torch_dtype {wdtype!r} unknown; set "
                        "quantization.weights (bf16, fp16, fp8, int8, int4-awq, gptq)")
    weight_total = int(count_params(m) * per)
    weight_source = (f"{count_params(m)} parameters (from the config shapes) x {per:g} "
                     f"bytes ({wdtype})")
    return weight_total, weight_source


def _kv_budget(inp: PlanInputs, mem: int, w_gpu: int, overhead: int) -> tuple[int, float, str]:
    """(KV-cache bytes per GPU, memory fraction used, the engine's rule) for one GPU: the
    serving engine's own rule (its ``kv_budget``, in its folder)."""
    from dockergen.parts.engines import engine_for

    budget, util, budget_rule = engine_for(inp.engine).kv_budget(
        mem, w_gpu, overhead, inp.gpu_memory_utilization)
    return max(budget, 0), util, budget_rule


def _model_limit(m: ModelShape, inp: PlanInputs) -> ContextLimit:
    """The model's longest context as the profile's engine derives it at start-up (its
    ``context_limit``, in its folder); where dockergen has not read the engine's rule,
    max_position_embeddings, not enforced."""
    from dockergen.parts.engines import engine_for
    from dockergen.parts.engines.run import ContextLimit, ModelContext, Rope

    model = ModelContext(m.model_type, m.lengths, tuple(Rope(*r) for r in m.rope),
                         m.rope_nested)
    limit = engine_for(inp.engine).context_limit(model, dict(inp.env))
    return limit or ContextLimit(m.max_position, f"max_position_embeddings="
                                 f"{m.max_position} (dockergen's bound: the {inp.engine} "
                                 "rule is not read from its source)", "", False)


def _largest_max_model_len(m: ModelShape, full_pt: int, slide_pt: int, limit: int,
                           batched: int | None, budget: int) -> int:
    """The largest max_model_len up to the model's ``limit`` whose one request fits
    ``budget`` (``batched``: max_num_batched_tokens, None: the engines' default of the
    length itself): vLLM's own search (src: vllm 0.33.0 vllm/v1/core/kv_cache_planning.py:97
    estimate_max_model_len, a binary search for the longest length whose KV specs'
    max_memory_usage_bytes fit the available KV-cache memory, not rounded), run up to the
    model's limit instead of the request: vLLM runs it only on a request that does not fit
    (:50-86 _check_enough_kv_cache_memory), so its answer there is this one."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _request_bytes(m, full_pt, slide_pt, mid, min(batched or mid, mid)) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _smallest_fitting_tp(m: ModelShape, inp: PlanInputs, tp: int, weight_total: int,
                         weight_source: str, overhead_gib: float) -> int | None:
    """The smallest tensor-parallel size above ``tp`` that divides the heads and fits."""
    for cand in (1, 2, 4, 8, 16, 32, 64):
        if cand <= tp or m.heads % cand:
            continue
        if _plan(m, inp, cand, weight_total, weight_source, overhead_gib,
                 search=False).fits:
            return cand
    return None


def _kv_formula(m: ModelShape, kv_bytes: int, full_layers: int) -> str:
    """The KV-bytes-per-token formula with the model's numbers, as the table shows it."""
    if m.kv_lora_rank:
        return (f"MLA: (kv_lora_rank {m.kv_lora_rank} + qk_rope_head_dim "
                f"{m.qk_rope_head_dim}) x {m.layers} layers x {kv_bytes} B, no factor 2; "
                "the latent is replicated on every TP rank")
    formula = (f"2 x {m.layers} layers x {m.kv_heads} kv_heads x {m.head_dim} head_dim "
               f"x {kv_bytes} B")
    if m.sliding_layers:
        formula += (f"; {m.sliding_layers} sliding-window layers hold at most "
                    f"sliding_window {m.sliding_window} - 1 + max_num_batched_tokens "
                    f"tokens, {full_layers} global layers grow with context")
    return formula


def _beyond_model(plan: Plan) -> tuple[str, str]:
    """(problem, fix) for a max_model_len longer than the model's own limit."""
    fit = min(plan.model_max_len, plan.largest_max_model_len)
    fix = f"set serving.max_model_len to {fit} or less"
    if fit < plan.model_max_len:
        fix += " (the longest the KV cache holds)"
    return (f"max_model_len {plan.max_model_len} is more than the model's own limit "
            f"{plan.model_max_len} ({plan.model.strip()}: {plan.model_max_len_rule}); "
            f"{plan.engine} {plan.model_max_len_beyond}"), fix


def misfit_message(plan: Plan) -> tuple[str, str]:
    """(problem, fix) for a plan that does not fit, worded like vLLM's start-up error."""
    problem = (f"max_model_len {plan.max_model_len} does not fit: one request needs "
               f"{plan.bytes_per_request_per_gpu / GIB:.2f} GiB KV cache per GPU, but "
               f"{plan.gpu} x tensor_parallel_size {plan.tensor_parallel} leaves "
               f"{plan.kv_budget_bytes_per_gpu / GIB:.2f} GiB after "
               f"{plan.weight_bytes_per_gpu / GIB:.2f} GiB weights and "
               f"{plan.overhead_bytes / GIB:.2f} GiB overhead (vLLM would stop at start-up: "
               "'To serve at least one request with the model's max seq len ...')")
    fixes = []
    if plan.largest_max_model_len > 0:
        fixes.append(f"set serving.max_model_len to {plan.largest_max_model_len} or less")
    if plan.smallest_tensor_parallel and plan.smallest_tensor_parallel != plan.tensor_parallel:
        fixes.append(f"set serving.tensor_parallel_size to {plan.smallest_tensor_parallel}")
    if not fixes:
        fixes.append("use GPUs with more memory, a smaller model or a quantized checkpoint")
    return problem, " or ".join(fixes)


def check_tensor_parallel(m: ModelShape, tp: int, location: Location) -> None:
    """Raise a :class:`ProfileError` at ``serving.tensor_parallel_size`` when ``tp`` does not
    divide the model's attention heads.

    Each rank holds heads / tp query heads, so the engines refuse such a size at start-up:
    vLLM "Total number of attention heads (32) must be divisible by tensor parallel size
    (3)." (src: vllm/config ModelConfig.verify_with_parallel_config), SGLang on GPUs an
    AssertionError "32 is not divisible by 3" (src: sglang srt/distributed/utils.py
    ensure_divisibility, from its attention layers). dockergen holds TensorRT-LLM to the same
    rule, as the smallest-TP search of :func:`make_plan` already does for every engine.
    """
    if m.heads % tp == 0:
        return
    divisors = [d for d in range(1, 65) if m.heads % d == 0]  # the profile allows 1..64
    lower = max(d for d in divisors if d < tp)  # 1 divides everything
    upper = min((d for d in divisors if d > tp), default=None)
    sizes = (f"{lower} or {upper} (divisors of {m.heads})" if upper
             else f"{lower} (a divisor of {m.heads})")
    raise ProfileError([Problem(
        location, "serving.tensor_parallel_size",
        f"{tp} does not divide num_attention_heads {m.heads} of {m.source}; vLLM and SGLang "
        f"refuse to start ('Total number of attention heads ({m.heads}) must be divisible by "
        f"tensor parallel size ({tp})')",
        f"set serving.tensor_parallel_size to {sizes}")])


def check_fit(plan: Plan, location: Location) -> None:
    """Raise a :class:`ProfileError` at ``serving.max_model_len`` when the engine would
    refuse it at start-up (or, TensorRT-LLM, serve a shorter one): beyond the model's own
    limit, or more than the KV cache holds."""
    if plan.model_max_len_enforced and plan.max_model_len > plan.model_max_len:
        raise ProfileError([Problem(location, "serving.max_model_len", *_beyond_model(plan))])
    if plan.fits:
        return
    problem, fix = misfit_message(plan)
    raise ProfileError([Problem(location, "serving.max_model_len", problem, fix)])
