"""vLLM's own ``vllm serve`` parser on the image's exact command, stopping before GPU work.

Runs inside the built image after ``driver_stub.py`` (prepended): the real
``vllm.entrypoints.cli.main.main`` builds the real parser (``make_arg_parser``), parses the
ENTRYPOINT and CMD exactly as the server would, and runs vLLM's own
``validate_parsed_serve_args``; only the serve step itself (``ServeSubcommand.cmd``, where the
engine starts) is replaced by a report. A flag the release lacks fails with the parser's own
message and exit code 2.

Two stand-ins, because the build host has no GPU: the driver library (``driver_stub.py``:
vLLM's kernels link ``libcuda.so.1``), and the platform, which NVML would detect: vLLM's
``CudaPlatform`` reporting the target GPU's compute capability (its defaults and kernel
choices at import read it), exactly as vLLM itself swaps the platform for ``vllm bench``.

Usage: python -c "$(cat driver_stub.py serve_parse.py)" CC serve MODEL [FLAG ...]
"""

import json
import sys

libcuda_stub()  # noqa: F821 - defined by driver_stub.py, prepended

import vllm.platforms  # noqa: E402
from vllm.platforms.cuda import CudaPlatform  # noqa: E402
from vllm.platforms.interface import DeviceCapability  # noqa: E402

CC = tuple(int(x) for x in sys.argv[1].split("."))


class TargetGpu(CudaPlatform):
    """CUDA as on the target GPU, without touching a device."""

    @classmethod
    def get_device_capability(cls, device_id=0):
        return DeviceCapability(*CC)

    @classmethod
    def get_device_name(cls, device_id=0):
        return f"stand-in for compute capability {sys.argv[1]}"

    @classmethod
    def get_device_total_memory(cls, device_id=0):
        return 80 << 30


vllm.platforms.current_platform = TargetGpu()

import vllm.entrypoints.cli.serve as serve  # noqa: E402


def parsed(args):
    print(json.dumps({"parsed": True, "model": getattr(args, "model_tag", None)
                      or getattr(args, "model", None)}))
    raise SystemExit(0)


serve.ServeSubcommand.cmd = staticmethod(parsed)

from vllm.entrypoints.cli.main import main  # noqa: E402

sys.argv = ["vllm", *sys.argv[2:]]
main()
print(json.dumps({"parsed": False, "reason": "vllm's main returned without serving"}))
sys.exit(1)
