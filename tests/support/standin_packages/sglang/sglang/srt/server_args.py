class ServerArgs:
    def __init__(self, **kw):
        self.__dict__.update(kw)
        self.__post_init__()

    def __post_init__(self):
        pass
