"""The pieces of an image, one module each: facts, checks, derivations, template, runtime part.

- :mod:`~dockergen.components.cuda`: GPU targets, CUDA toolkit, base images (``cuda.yaml``)
- :mod:`~dockergen.components.python`: interpreter, uv, venv (``python.yaml``)
- :mod:`~dockergen.components.torch`: the torch pin and its CUDA index (``torch.yaml``)
- :mod:`~dockergen.components.flash_attn`: the FlashAttention-2 build (``flash_attn.yaml``)
- :mod:`~dockergen.components.serving`: one folder per serving engine
  (``serving/<engine>/``: its class, facts, flag list, metric names, run facts), registered
  from :mod:`dockergen.engine_names`
- :mod:`~dockergen.components.image`: tags, labels, what the image must never carry

Each component keeps its facts in the YAML file beside it (every fact with its source), its
checks and derivations in its module, and its Dockerfile text in
``templates/components/<name>.j2``. :mod:`dockergen.resolve` runs them in a one-way order
and assembles the typed model (:mod:`dockergen.model`).
"""
