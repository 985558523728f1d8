import argparse
import getpass
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import resources

LAUNCHER = ('#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, '
            '"launcher", NULL, -1, NULL};\nPyMODINIT_FUNC PyInit_launcher(void) '
            '{ return PyModule_Create(&m); }\n')


def serve_args(package: str, usage: str, positional: bool) -> dict:
    """`<engine> serve ...` parsed like the real release's parser (exit 2 on anything else)."""
    argv = sys.argv[1:]
    if not argv or argv[0] != "serve":
        print("usage: " + usage, file=sys.stderr)
        sys.exit(2)
    # vLLM's FlexibleArgumentParser reads --max_model_len as --max-model-len
    rest = [a.split("=", 1)[0].replace("_", "-") + a[len(a.split("=", 1)[0]):]
            if a.startswith("--") and positional else a for a in argv[1:]]
    return vars(parser(package, package + " serve", positional).parse_args(rest))


def parser(package: str, prog: str, positional: bool) -> argparse.ArgumentParser:
    """Every option string of the real release (flags.json) and its --no- form."""
    p = argparse.ArgumentParser(prog=prog, allow_abbrev=False)  # no prefix matching
    if positional:
        p.add_argument("model_tag", nargs="?")
    flags = json.loads(resources.files(package).joinpath("flags.json").read_text())
    for flag in flags:
        p.add_argument(flag, nargs="?", const=True, default=None)
        if flag.startswith("--") and not flag.startswith("--no-") and positional:
            p.add_argument("--no-" + flag[2:], action="store_true")  # BooleanOptionalAction
    return p


def triton_launcher() -> None:
    """What triton/runtime/build.py does at the first kernel launch."""
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise SystemExit("RuntimeError: Failed to find C compiler. Please specify via CC "
                         "environment variable or set triton.knobs.build.impl.")
    d = tempfile.mkdtemp()
    with open(os.path.join(d, "launcher.c"), "w") as fh:
        fh.write(LAUNCHER)
    # Triton keeps the built launcher in its cache (TRITON_CACHE_DIR, default
    # ~/.triton/cache: triton/knobs.py) and loads it from there
    cache = os.environ.get("TRITON_CACHE_DIR") or os.path.expanduser("~/.triton/cache")
    os.makedirs(cache, exist_ok=True)
    so = os.path.join(cache, "launcher" + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.check_call([cc, os.path.join(d, "launcher.c"), "-O1", "-shared", "-fPIC",
                           "-I" + sysconfig.get_paths()["include"], "-o", so])
    # and loads it, as Triton does (a noexec cache mount fails here, as with the real one)
    import importlib.util
    spec = importlib.util.spec_from_file_location("launcher", so)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))


def _home(*parts: str) -> str:
    return os.path.join(os.path.expanduser("~"), *parts)


def _xdg_cache(*parts: str) -> str:
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or _home(".cache"), *parts)


# Where each library the real engines load puts its run-time cache, resolved as that library
# resolves it (the environment variable, else its default), and a file it writes there.
def _hf_modules() -> str:
    # transformers creates HF_MODULES_CACHE (HF_HOME/modules) with an __init__.py at import
    # (transformers/dynamic_module_utils.py init_hf_modules; huggingface_hub constants.py)
    return os.path.join(os.environ.get("HF_HOME") or _xdg_cache("huggingface"), "modules")


def _inductor() -> str:
    # torch/_inductor/runtime/cache_dir_utils.py cache_dir(): no fallback around getuser(),
    # which raises for a UID without a passwd entry
    return os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(
        tempfile.gettempdir(), "torchinductor_" + getpass.getuser())


CACHES = {
    "huggingface": _hf_modules,
    "inductor": _inductor,
    # vllm/envs.py VLLM_CACHE_ROOT (torch.compile artifacts under torch_compile_cache)
    "vllm": lambda: os.path.join(os.environ.get("VLLM_CACHE_ROOT") or _xdg_cache("vllm"),
                                 "torch_compile_cache"),
    # flashinfer/jit/env.py FLASHINFER_WORKSPACE_BASE (default ~) /.cache/flashinfer
    "flashinfer": lambda: os.path.join(os.environ.get("FLASHINFER_WORKSPACE_BASE")
                                       or os.path.expanduser("~"), ".cache", "flashinfer"),
    # sglang/srt/environ.py SGLANG_CACHE_DIR ~/.cache/sglang; SGLANG_JIT_CACHE_DIR under it
    "sglang-jit": lambda: os.environ.get("SGLANG_JIT_CACHE_DIR") or _home(
        ".cache", "sglang", "jit"),
}


def write_caches(*names: str) -> None:
    """What the real engine writes at start, in the same folders: one file per cache."""
    for name in names:
        folder = CACHES[name]()
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "dockergen-standin-" + name), "w") as fh:
            fh.write(name)


def serve(host: str, port: int, served: str) -> None:
    """/health, /v1/models and /v1/completions for the served model name."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            request = json.loads(self.rfile.read(length) or b"{}")
            ok = self.path == "/v1/completions" and request.get("model") == served
            self.send_response(200 if ok else 404)
            self.end_headers()
            if ok:
                self.wfile.write(json.dumps({"choices": [{"text": "!"}]}).encode())

        def do_GET(self) -> None:
            body = {"/health": b"", "/v1/models": json.dumps(
                {"data": [{"id": served}]}).encode()}.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, format: str, *a: object) -> None:  # noqa: A002
            pass

    HTTPServer((host, port), Handler).serve_forever()
