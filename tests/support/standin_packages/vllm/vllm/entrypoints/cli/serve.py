import argparse


class ServeSubcommand:
    @staticmethod
    def cmd(args: argparse.Namespace) -> None:
        from vllm.cli import run
        run(vars(args))
