"""dockergen: validated, deterministic multi-stage Dockerfiles for GPU LLM-inference images.

The pipeline is: load a YAML profile (:mod:`dockergen.loader`) into the closed model
(:mod:`dockergen.profile`), check it against the compatibility knowledge
(:mod:`dockergen.knowledge`, :mod:`dockergen.rules`), derive every setting
(:mod:`dockergen.resolve`) and format it with Jinja templates (:mod:`dockergen.render`).
Only :mod:`dockergen.cli` prints or exits.
"""

__version__ = "0.1.0"
