def main() -> None:
    from sglang.cli_impl import parse
    import sglang.launch_server
    from sglang.srt.server_args import ServerArgs
    sglang.launch_server.run_server(ServerArgs(**parse()))
