"""Exact weight bytes of a model folder, from its safetensors headers (read by bound: a
damaged or hostile header is an error naming the file, never a large read).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import NoReturn

from dockergen.files import inputs
from dockergen.knowledge.models import PlanError, shown

# Bits per element of each safetensors dtype (src: huggingface/safetensors
# safetensors/src/tensor.rs Dtype::bitsize; F4 and F6 are packed, so a tensor's bits must
# make whole bytes).
SAFETENSORS_DTYPE_BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
                          "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "I16": 16, "U16": 16,
                          "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64,
                          "F64": 64, "I64": 64, "U64": 64}


def safetensors_bytes(model_dir: Path) -> int:
    """Exact weight bytes from the safetensors headers of a model folder.

    Format (src: huggingface/safetensors README "Format"): 8-byte little-endian header
    length N, then N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, ...,
    "__metadata__": {...}}; a tensor occupies end - begin bytes. Only headers are read.
    """
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise PlanError(f"{model_dir}: no *.safetensors files; give the model folder "
                        "(with config.json and its safetensors shards) or use --model-config")
    return sum(_shard_bytes(f) for f in files)


def _shard_bytes(f: Path) -> int:
    """The tensor bytes of one shard, after checking its header against the file."""
    try:
        with inputs.open_input(f, "safetensors-header") as (fh, size):
            head = fh.read(8)
            if len(head) != 8:
                raise ValueError("shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            # the format's own bound (inputs.LIMITS), and what the file can hold
            if n > min(inputs.LIMITS["safetensors-header"][0] - 8, size - 8):
                raise ValueError(f"header length {n} is implausible for a file of {size} "
                                 "bytes")
            header = json.loads(fh.read(n))
    except inputs.InputError as exc:
        raise PlanError(str(exc)) from None
    except (OSError, ValueError, RecursionError) as exc:
        raise PlanError(f"{f}: not a safetensors file: {exc}; re-download the "
                        "checkpoint") from None
    return _header_bytes(f, header, size - 8 - n)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _header_bytes(f: Path, header: object, buffer: int) -> int:
    """The tensor bytes a parsed safetensors header declares, after checking it.

    A damaged or hand-made header must not reach the sum: ``end < begin`` would subtract
    weights and print a plan that fits, a float offset (``1e400``) would crash, and offsets
    past the file (``[0, 1e15]`` in a 1 KB shard) or shapes the offsets do not hold
    (``[1e30, 1e30]`` in 2 bytes) would plan a model that is not there. As the safetensors
    library itself checks (src: safetensors/src/tensor.rs Metadata::validate): each tensor's
    span is its shape x its dtype's size, the spans are contiguous from 0, and the last one
    ends where the file does (``buffer``: the bytes after the header).
    """
    if not isinstance(header, dict):
        raise PlanError(f"{f}: not a safetensors file: the header is a JSON "
                        f"{type(header).__name__}, not an object of tensors; re-download "
                        "the checkpoint")
    spans = []
    for name, info in header.items():
        if name != "__metadata__":
            spans.append((*_span(f, name, info, buffer), name))
    at = 0
    for begin, end, name in sorted(spans):
        if begin != at:
            _damaged(f, name, f"data_offsets begin at {begin}, but the tensors before it end "
                              f"at {at} (tensors are stored back to back from 0)")
        at = end
    if at != buffer:
        _damaged(f, None, f"the tensors end at byte {at} of the data, but the file holds "
                          f"{buffer} bytes after its header")
    return at


def _span(f: Path, name: str, info: object, buffer: int) -> tuple[int, int]:
    """(begin, end) of one tensor, checked against its dtype, shape and the file."""
    offsets = info.get("data_offsets") if isinstance(info, dict) else None
    if not (isinstance(info, dict) and isinstance(info.get("dtype"), str)
            and isinstance(info.get("shape"), list)
            and all(_is_count(d) for d in info["shape"])):
        _damaged(f, name, f"expected {{dtype, shape, data_offsets}}, got {json.dumps(info)[:200]}")
    if not (isinstance(offsets, list) and len(offsets) == 2
            and all(_is_count(o) for o in offsets) and offsets[0] <= offsets[1]):
        _damaged(f, name, f"data_offsets {json.dumps(offsets)[:200]}: expected [begin, end], "
                          "whole numbers with 0 <= begin <= end")
    begin, end = offsets
    if end > buffer:
        _damaged(f, name, f"data_offsets end {end} is past the end of the file, which holds "
                          f"{buffer} bytes after its header")
    bits = SAFETENSORS_DTYPE_BITS.get(info["dtype"])
    if bits is None:
        _damaged(f, name, f"dtype {info['dtype'][:40]!r} is not a safetensors dtype "
                          f"({', '.join(SAFETENSORS_DTYPE_BITS)})")
    elements = 1
    for dim in info["shape"]:
        elements *= dim
        if elements * bits > 8 * buffer:  # stop before a product of huge dimensions grows
            break
    if elements * bits != 8 * (end - begin):
        need = ("more than the file holds" if elements * bits > 8 * buffer
                else f"{elements * bits / 8:g} bytes")
        _damaged(f, name, f"shape {shown(info['shape'])} of {info['dtype']} needs "
                          f"{need}, but data_offsets [{begin}, {end}] span {end - begin} bytes")
    return begin, end


def _damaged(f: Path, name: str | None, problem: str) -> NoReturn:
    tensor = f"tensor {name!r}: " if name is not None else ""
    raise PlanError(f"{f}: {tensor}{problem}; the header is damaged: re-download the "
                    "checkpoint")
