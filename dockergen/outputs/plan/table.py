"""The plan as a readable table: one line per quantity, with its formula and sources.
"""

from __future__ import annotations

from dockergen.knowledge.models import GIB, KIB
from dockergen.outputs.plan.capacity import Plan


def _size(n: int) -> str:
    if n >= GIB:
        return f"{n / GIB:.2f} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.2f} MiB"
    if n >= KIB:
        return f"{n / KIB:.2f} KiB"
    return f"{n} B"


def format_table(plan: Plan) -> str:
    """The readable plan: one line per quantity, with the formula and sources."""
    rows = [
        ("model", f"{plan.model} ({plan.attention}; {plan.model_source})"),
        ("engine / GPU", f"{plan.engine} on {plan.gpu} ({_size(plan.gpu_memory_bytes)}) "
                         f"x TP {plan.tensor_parallel}"),
        ("weights", f"{_size(plan.weight_bytes_total)} total, "
                    f"{_size(plan.weight_bytes_per_gpu)} per GPU ({plan.weight_bytes_source})"),
        ("KV per token", f"{_size(plan.kv_bytes_per_token)} ({plan.kv_cache_dtype}; "
                         f"{plan.formula})"),
        ("KV per token/GPU", f"{_size(plan.kv_bytes_per_token_per_gpu)} growing"
         + (f" + {_size(plan.sliding_bytes_per_token_per_gpu)} bounded by the window"
            if plan.sliding_bytes_per_token_per_gpu else "")),
        ("overhead", f"{_size(plan.overhead_bytes)} ({plan.overhead_source})"),
        ("KV budget/GPU", f"{_size(plan.kv_budget_bytes_per_gpu)} "
                          f"(gpu_memory_utilization {plan.gpu_memory_utilization:g})"),
        ("tokens per GPU", f"{plan.tokens_per_gpu}"),
        ("max_model_len", f"{plan.max_model_len} ({_size(plan.bytes_per_request_per_gpu)} "
                          "per request per GPU)"),
        ("max concurrency", f"{plan.max_concurrency:.2f}x requests of max_model_len"),
        ("model's limit", f"{plan.model_max_len} ({plan.model_max_len_rule})"),
        ("longest that fits", f"{plan.largest_max_model_len} (max_model_len of one request "
                              "the KV budget holds, up to the model's limit)"),
        ("fits", "yes" if plan.fits else
         f"NO (largest max_model_len {plan.largest_max_model_len}, smallest TP "
         f"{plan.smallest_tensor_parallel or 'none up to 64'})"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    lines += [f"{'note'.ljust(width)}  {n}" for n in plan.notes]
    return "\n".join(lines) + "\n"
