# hpccm recipe for benchmarks/startup_bench.py: a two-stage CUDA image comparable to a
# dockergen render (devel stage with Python and a pinned torch; runtime stage copying it).
# Stage0/Stage1 and the building blocks are injected by hpccm when it runs the recipe.
# ruff: noqa: F821
Stage0 += baseimage(image="nvidia/cuda:13.0.2-devel-ubuntu22.04", _as="build")
Stage0 += python(python2=False, python3=True)
Stage0 += pip(packages=["torch==2.14.0", "vllm==0.33.0"], pip="pip3")
Stage1 += baseimage(image="nvidia/cuda:13.0.2-runtime-ubuntu22.04")
Stage1 += Stage0.runtime()
