"""`sglang serve`: the real release's flags, Triton's launcher build, /health."""
from server_common import serve, serve_args, sys, triton_launcher, write_caches  # spliced


def parse() -> dict:
    args = serve_args("sglang", "sglang serve --model-path MODEL ...", positional=False)
    model = args.get("model_path")
    if not isinstance(model, str):
        print("sglang serve: error: the following arguments are required: --model-path",
              file=sys.stderr)
        sys.exit(2)
    return args


def serve_forever(args: dict) -> None:
    triton_launcher()
    write_caches("huggingface", "sglang-jit", "flashinfer", "inductor")
    serve(args.get("host") or "127.0.0.1", int(args.get("port") or 30000),
          args.get("served_model_name") or args["model_path"])


def main() -> None:
    from sglang.cli.main import main as cli_main
    cli_main()
