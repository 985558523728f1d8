"""dockergen: validated, deterministic multi-stage Dockerfiles for GPU LLM-inference images.

The pipeline is: load a YAML profile (:mod:`dockergen.input.loader`) into the closed model
(:mod:`dockergen.input.profile`), let every piece of the image check and derive its part
(:mod:`dockergen.parts`, run by :mod:`dockergen.resolve.fold`) into the typed resolved
model (:mod:`dockergen.resolve.model`), and format it with Jinja templates
(:mod:`dockergen.outputs.dockerfile`). Only :mod:`dockergen.cli` prints or exits.
"""

__version__ = "0.1.0"
