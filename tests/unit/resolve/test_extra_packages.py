"""packages.pip / packages.apt: extra packages through the same pins and checks."""

from __future__ import annotations

import dockerfile

from tests.conftest import run_cli


def _render(*overrides: str, profile: str = "h100-fp8") -> tuple[int, str, str]:
    args = [a for o in overrides for a in ("--set", o)]
    result = run_cli("render", "-q", profile, *args)
    return result.rc, result.out, result.err


def test_extra_pip_and_apt_packages_are_installed() -> None:
    """Before the fix: there was no field for extra pip or apt packages."""
    rc, out, err = _render("packages.pip=[transformers==4.57.1, 'accelerate[torch]==1.10.1']",
                           "packages.apt=[libgl1]")
    assert rc == 0, err
    runs = [" ".join(c.value) for c in dockerfile.parse_string(out) if c.cmd == "RUN"]
    engine = next(r for r in runs if "vllm==0.33.0" in r)
    # one resolver run with the engine and the torch pin, then the torch check
    assert "vllm==0.33.0 transformers==4.57.1 'accelerate[torch]==1.10.1' torch==2.14.0" in engine
    assert 'assert v.split("+")[0] == "2.14.0"' in engine
    assert any("--no-install-recommends ca-certificates gcc libc6-dev libgl1" in r for r in runs)
    explained = run_cli("explain", "h100-fp8", "--set", "packages.pip=[transformers==4.57.1]")
    assert any(line.split() == ["extra", "pip", "transformers==4.57.1"]
               for line in explained.out.splitlines())


def test_pins_dockergen_derives_cannot_be_replaced() -> None:
    rc, _, err = _render("packages.pip=[transformers==4.57.1, torch==2.0.0, Flash_Attn==2.8.3, "
                         "vllm==0.30.0, transformers==4.56.0]")
    assert rc == 2
    lines = err.splitlines()
    assert lines[0].startswith("--set packages.pip: packages.pip[1]: torch is pinned by "
                               "dockergen (torch==2.14.0, derived from the profile)")
    assert lines[1] == ("--set packages.pip: packages.pip[2]: flash-attn is built by "
                        "dockergen's flash-attn stage (arch list, MAX_JOBS and C++ standard "
                        "checked), not by pip; remove it and set flash_attn.build: source with "
                        "flash_attn.version")
    assert lines[2].startswith("--set packages.pip: packages.pip[3]: vllm is pinned by "
                               "dockergen (vllm==0.33.0")
    assert lines[3] == ("--set packages.pip: packages.pip[4]: transformers is already pinned "
                        "at packages.pip[0]; keep one pin")


def test_unpinned_or_url_packages_are_rejected() -> None:
    for bad in ("transformers", "transformers>=4", "git+https://x/y.git", "x==1.0; rm -rf /"):
        rc, _, err = _render(f"packages.pip=['{bad}']")
        assert rc == 2, bad
        assert "an exact pin like" in err, (bad, err)


def test_a_compiler_needs_the_jit_toolchain() -> None:
    # TensorRT-LLM's runtime carries no compiler (a smoke check insists on it) ...
    rc, _, err = _render("packages.apt=[g++]", profile="h100-trtllm-fp8")
    assert rc == 2
    assert "g++ is a compiler; the runtime image carries none" in err
    rc, _, err = _render("packages.apt=[g++]", "runtime.jit_toolchain=true",
                         profile="h100-trtllm-fp8")
    assert rc == 0, err
    # ... vLLM's keeps gcc for Triton's launcher, and nothing else
    rc, _, err = _render("packages.apt=[gcc]")
    assert rc == 0, err
    rc, _, err = _render("packages.apt=[g++, cuda-toolkit-13-0, clang]")
    assert rc == 2
    assert err.count("is a compiler; the runtime image carries only the C compiler its "
                     "Triton kernels need (gcc, libc6-dev)") == 3, err
    # cuda-toolkit installs nvcc, which the smoke check refuses (review: it passed validate)
    rc, _, err = _render("packages.apt=[cuda-toolkit-13-0]", profile="h100-trtllm-fp8")
    assert rc == 2 and "cuda-toolkit-13-0 is a compiler" in err
