"""dockergen: validated, deterministic multi-stage Dockerfiles for GPU LLM-inference images.

The pipeline is: load a YAML profile (:mod:`dockergen.loader`) into the closed model
(:mod:`dockergen.profile`), let every piece of the image check and derive its part
(:mod:`dockergen.components`, run by :mod:`dockergen.resolve`) into the typed resolved
model (:mod:`dockergen.model`), and format it with Jinja templates
(:mod:`dockergen.render`). Only :mod:`dockergen.cli` prints or exits.
"""

__version__ = "0.1.0"
