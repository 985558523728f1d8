"""SGLang's own ``sglang serve`` parser on the image's exact command, stopping before GPU work.

Runs inside the built image after ``driver_stub.py`` (prepended): the real
``sglang.cli.main.main`` dispatches ``serve`` as the server does (backend selection, then
``prepare_server_args``: SGLang's real ``ServerArgs.add_cli_args`` parser and
``ServerArgs.from_cli_args``); two steps are replaced by a report: ``ServerArgs.__post_init__``
(it sizes memory and picks kernels from the GPU) and ``run_server`` (the engine start). A
flag the release lacks fails with argparse's own message and exit code 2.

Usage: python -c "$(cat driver_stub.py serve_parse.py)" CC serve --model-path M ...
"""

import json
import sys

libcuda_stub()  # noqa: F821 - defined by driver_stub.py, prepended

import sglang.launch_server  # noqa: E402
import sglang.srt.server_args as server_args  # noqa: E402


def parsed(args):
    print(json.dumps({"parsed": True, "model": args.model_path}))
    sys.stdout.flush()
    import os
    os._exit(0)  # serve() kills the process tree in a finally: leave before it


server_args.ServerArgs.__post_init__ = lambda self: None
sglang.launch_server.run_server = parsed

from sglang.cli.main import main  # noqa: E402

sys.argv = ["sglang", *sys.argv[2:]]
main()
print(json.dumps({"parsed": False, "reason": "sglang's main returned without serving"}))
sys.exit(1)
