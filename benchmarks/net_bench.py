"""What dockergen's HTTP layer costs on the real PyPI reads the knowledge checker does.

The reads of ``python -m dockergen.maint.knowledge check``: PEP 691 JSON pages of the
engines' projects and a range read of a wheel's end (its zip directory). Each read is done
alternately by the old path (``urllib.request.urlopen`` as dockergen.maint.pypi read before
the HTTP layer: whole body, no limits) and by :func:`dockergen.net.http.get`, in the same run;
medians of ``ROUNDS`` each, and their ratio (goal: no measurable cost, ratio ~1.0).
Needs PyPI. Run: ``python benchmarks/net_bench.py``.
"""

from __future__ import annotations

import statistics
import time
import urllib.request
from collections.abc import Callable

from dockergen.maint import pypi
from dockergen.net import http as net

ROUNDS = 7
PAGES = ("vllm", "sglang", "flash-attn", "torch")
ACCEPT = {"Accept": "application/vnd.pypi.simple.v1+json"}


def _old(url: str, headers: dict[str, str]) -> bytes:
    request = urllib.request.Request(url, headers={"User-Agent": "bench", **headers})
    with urllib.request.urlopen(request, timeout=120) as resp:  # noqa: S310 - https
        return bytes(resp.read())


def _new(url: str, headers: dict[str, str], kind: str) -> bytes:
    return net.get(url, kind, headers).body


def _timed(read: Callable[[], bytes]) -> float:
    start = time.perf_counter()
    read()
    return time.perf_counter() - start


def main() -> None:
    wheel = next(f for f in pypi.files_of(pypi.project("vllm"), "0.11.0")
                 if f.filename.endswith(".whl"))
    span = {"Range": f"bytes={wheel.size - (1 << 20)}-{wheel.size - 1}"}
    reads: list[tuple[str, str, dict[str, str], str]] = [
        (f"page {p}", f"{pypi.PYPI_SIMPLE}/{p}/", ACCEPT, "page") for p in PAGES]
    reads.append(("range 1 MiB", wheel.url, span, "range"))
    net.begin(3600, 10_000)
    total_old = total_new = 0.0
    for name, url, headers, kind in reads:
        old, new = [], []
        for _ in range(ROUNDS):
            old.append(_timed(lambda u=url, h=headers: _old(u, h)))
            new.append(_timed(lambda u=url, h=headers, k=kind: _new(u, h, k)))
        mo, mn = statistics.median(old), statistics.median(new)
        total_old, total_new = total_old + mo, total_new + mn
        print(f"{name:<18} urllib {mo * 1000:8.1f} ms   net {mn * 1000:8.1f} ms   "
              f"ratio {mn / mo:.2f}")
    print(f"{'all (sum of medians)':<18} urllib {total_old * 1000:8.1f} ms   net "
          f"{total_new * 1000:8.1f} ms   ratio {total_new / total_old:.2f}")


if __name__ == "__main__":
    main()
