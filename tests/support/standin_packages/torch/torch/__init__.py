"""Stand-in for torch (dockergen tests): versions only."""
__version__ = "{version}+standin"


class version:  # noqa: N801 - mirrors torch.version
    cuda = "13.0"


class _C:  # noqa: N801 - the compiled arch list torch.cuda.get_arch_list() reads
    @staticmethod
    def _cuda_getArchFlags() -> str:  # noqa: N802
        return "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"  # real torch 2.14.0 (CUDA 13.0)
