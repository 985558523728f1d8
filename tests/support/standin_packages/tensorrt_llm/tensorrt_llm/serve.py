"""`trtllm-serve MODEL --host H --port P ...`: answers /health and /v1/models."""
from server_common import serve, sys  # spliced in by standin.py


def main() -> None:
    args = sys.argv[1:]
    host = args[args.index("--host") + 1] if "--host" in args else "0.0.0.0"
    port = int(args[args.index("--port") + 1]) if "--port" in args else 8000
    serve(host, port, args[0])
