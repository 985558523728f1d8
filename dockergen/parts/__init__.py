"""The pieces of an image, one module each: facts, checks, derivations, template, runtime part.

- :mod:`~dockergen.parts.cuda`: GPU targets, CUDA toolkit, base images (``cuda.yaml``)
- :mod:`~dockergen.parts.python`: interpreter, uv, venv (``python.yaml``)
- :mod:`~dockergen.parts.torch`: the torch pin and its CUDA index (``torch.yaml``)
- :mod:`~dockergen.parts.flash_attn`: the FlashAttention-2 build (``flash_attn.yaml``)
- :mod:`~dockergen.parts.engines`: one folder per serving engine
  (``serving/<engine>/``: its class, facts, flag list, metric names, run facts), registered
  from :mod:`dockergen.engine_names`
- :mod:`~dockergen.parts.image`: tags, labels, what the image must never carry

Each component keeps its facts in the YAML file beside it (every fact with its source), its
checks and derivations in its module, and its Dockerfile text in
``templates/parts/<name>.j2``. Each is a :class:`~dockergen.resolve.part.Part` (or two, where
its rules sit at two places of the order): :func:`dockergen.parts.lineup.for_engine` lists a
profile's parts, :mod:`dockergen.resolve.fold` runs them in their one-way order and merges
their shares, and :func:`dockergen.parts.assemble.assemble` builds the typed model
(:mod:`dockergen.resolve.model`) from their values.
"""
