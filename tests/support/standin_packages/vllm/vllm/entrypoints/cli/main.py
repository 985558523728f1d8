import argparse


def main() -> None:
    from vllm.cli import parse
    from vllm.entrypoints.cli.serve import ServeSubcommand
    ServeSubcommand.cmd(argparse.Namespace(**parse()))
