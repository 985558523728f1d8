class CudaPlatform:
    pass
