def run_server(server_args):
    from sglang.cli_impl import serve_forever
    serve_forever(vars(server_args))
