"""`vllm serve MODEL ...`: the real release's flags, Triton's launcher build."""
from server_common import serve, serve_args, sys, triton_launcher, write_caches  # spliced


def parse() -> dict:
    args = serve_args("vllm", "vllm serve MODEL [--host H] [--port P] ...", positional=True)
    model = args.get("model_tag") or args.get("model")
    if not isinstance(model, str):
        print("vllm serve: error: a model is required", file=sys.stderr)
        sys.exit(2)
    return args


def run(args: dict) -> None:
    model = args.get("model_tag") or args.get("model")
    triton_launcher()
    write_caches("huggingface", "vllm", "flashinfer", "inductor")
    serve(args.get("host") or "0.0.0.0", int(args.get("port") or 8000),
          args.get("served_model_name") or model)


def main() -> None:
    from vllm.entrypoints.cli.main import main as cli_main
    cli_main()
