"""The bad-profile corpus: each case is an edit of VALID and the exact problems expected.

Line numbers refer to the edited text written as ``profile.yaml``. Each case names the
rule or YAML pitfall it covers.
"""

from __future__ import annotations

VALID = """\
name: test
gpu:
  targets: [h100]
cuda:
  version: "13.0.2"
  os: ubuntu22.04
python: "3.12"
engine:
  name: vllm
  version: "0.32.0"
flash_attn:
  build: source
  version: "2.8.3"
quantization:
  weights: bf16
  kv_cache: auto
serving:
  model: /models/m
  max_model_len: 8192
image:
  name: registry.example.com/llm/vllm
build:
  memory_gib: 64
"""

# (case id, [(old, new), ...] applied to VALID, --set overrides)
CASES: list[tuple[str, list[tuple[str, str]], list[str]]] = [
    # --- YAML syntax and pitfalls
    ("yaml-syntax-flow", [("targets: [h100]", "targets: [h100")], []),
    ("yaml-syntax-indent", [("  os: ubuntu22.04", "   os: ubuntu22.04\n  - x")], []),
    ("yaml-duplicate-key", [('python: "3.12"', 'python: "3.12"\npython: "3.11"')], []),
    ("yaml-duplicate-nested", [("  kv_cache: auto", "  kv_cache: auto\n  weights: fp8")], []),
    ("yaml-tab", [("  memory_gib: 64", "\tmemory_gib: 64")], []),
    ("yaml-control-char", [("name: test", "name: \"te\x7fst\"")], []),
    ("text-bidi-override", [("name: test", "name: test\ndescription: \"abc\u202edef\"")], []),
    ("yaml-not-mapping", [(VALID, "- just\n- a list\n")], []),
    ("yaml-empty", [(VALID, "# nothing here\n")], []),
    # --- unquoted versions and wrong types
    ("unquoted-python-3.10", [('python: "3.12"', "python: 3.10")], []),
    ("unquoted-cuda", [('version: "13.0.2"', "version: 13.0")], []),
    ("unquoted-engine-version-int", [('version: "0.32.0"', "version: 1")], []),
    ("unquoted-flash-attn", [('version: "2.8.3"', "version: 2.8")], []),
    ("wrong-type-port", [("  max_model_len: 8192", "  max_model_len: 8192\n  port: \"8000\"")],
     []),
    ("wrong-type-bool-yes", [("  max_model_len: 8192",
                              "  max_model_len: 8192\n  enable_chunked_prefill: yes")], []),
    ("wrong-type-targets-scalar", [("targets: [h100]", "targets: h100")], []),
    ("wrong-type-section", [("build:\n  memory_gib: 64", "build: big")], []),
    ("wrong-type-float-int", [("max_model_len: 8192", "max_model_len: 8192.5")], []),
    ("date-as-version", [('version: "0.32.0"', "version: 2024-01-01")], []),
    # --- unknown and missing keys
    ("unknown-key-typo", [('  version: "2.8.3"', '  verison: "2.8.3"')], []),
    ("unknown-top-level", [("name: test", "name: test\nengnie: {}")], []),
    ("missing-required", [("  model: /models/m\n", "")], []),
    ("missing-section", [("image:\n  name: registry.example.com/llm/vllm\n", "")], []),
    ("unknown-choice", [("  name: vllm", "  name: vlm")], []),
    ("empty-targets", [("targets: [h100]", "targets: []")], []),
    # --- ranges and shapes
    ("gpu-mem-util-range", [("  max_model_len: 8192",
                             "  max_model_len: 8192\n  gpu_memory_utilization: 1.5")], []),
    ("port-range", [("  max_model_len: 8192", "  max_model_len: 8192\n  port: 70000")], []),
    ("name-shape", [("name: test", "name: Test Profile")], []),
    ("image-ref-shape", [("  os: ubuntu22.04", "  os: ubuntu22.04\n  devel_image: "
                                               "\"nvidia/cuda:13 ; rm -rf /\"")], []),
    ("pip-index-credentials", [("  memory_gib: 64", "  memory_gib: 64\n  pip_index_url: "
                                                    "https://user:s3cret@pypi.example.com/simple")],
     []),
    ("max-jobs-bad", [('  version: "2.8.3"', '  version: "2.8.3"\n  max_jobs: lots')], []),
    # --- compatibility rules
    ("gpu-unknown", [("targets: [h100]", "targets: [h10]")], []),
    ("cc-unknown", [("targets: [h100]", 'targets: ["8.7"]')], []),
    ("cuda-unknown", [('version: "13.0.2"', 'version: "13.0.9"')], []),
    ("cuda-os", [("os: ubuntu22.04", "os: ubuntu20.04")], []),
    ("blackwell-on-cuda-12.4", [("targets: [h100]", "targets: [b200]"),
                                ('version: "13.0.2"', 'version: "12.4.1"'),
                                ('version: "0.32.0"', 'version: "0.19.1"')], []),
    ("volta-on-cuda-13", [("targets: [h100]", "targets: [v100]"),
                          ("  build: source", "  build: none"),
                          ("weights: bf16", "weights: fp16")], []),
    ("engine-release-unknown", [('version: "0.32.0"', 'version: "0.99.0"')], []),
    ("engine-python", [('python: "3.12"', 'python: "3.10"')], []),
    ("engine-cuda-major", [('version: "13.0.2"', 'version: "12.8.1"')], []),
    ("engine-torch-pin", [('  version: "0.32.0"', '  version: "0.32.0"\n  torch: "2.14.0"')],
     []),
    ("fa2-on-turing", [("targets: [h100]", "targets: [t4]"), ("weights: bf16", "weights: fp16")],
     []),
    ("fa2-version-unknown", [('version: "2.8.3"', 'version: "2.9.0"')], []),
    ("fa2-old-cannot-build-blackwell", [("targets: [h100]", "targets: [b200]"),
                                        ('version: "2.8.3"', 'version: "2.7.2.post1"')], []),
    ("fa2-cxx-std-torch-2.14", [('version: "0.32.0"', 'version: "0.33.0"')], []),
    ("fa2-version-not-on-pypi", [('version: "2.8.3"', 'version: "2.7.4"')], []),
    ("fa2-source-still-cxx17", [('version: "0.32.0"', 'version: "0.33.0"'),
                                ('  version: "2.8.3"', '  version: "2.8.3"\n  source: {git: '
                                 '"https://github.com/Dao-AILab/flash-attention", commit: '
                                 '"' + "0" * 40 + '", cxx_std: 17}')], []),
    ("fa2-source-two-kinds", [('  version: "2.8.3"', '  version: "2.8.3"\n  source: {git: '
                               '"https://github.com/Dao-AILab/flash-attention", url: '
                               '"https://example.com/fa.tar.gz"}')], []),
    ("fa2-memory", [('  version: "2.8.3"', '  version: "2.8.3"\n  max_jobs: 16')], []),
    ("fp8-trtllm-ampere", [("targets: [h100]", "targets: [a100]"),
                           ("  name: vllm", "  name: tensorrt-llm"),
                           ('version: "0.32.0"', 'version: "1.1.0"'),
                           ("  build: source", "  build: none"),
                           ("weights: bf16", "weights: fp8")], []),
    ("bf16-on-turing", [("targets: [h100]", "targets: [t4]"), ("  build: source", "  build: none")],
     []),
    ("kv-int8-vllm", [("kv_cache: auto", "kv_cache: int8")], []),
    ("batched-tokens-below-len", [("  max_model_len: 8192", "  max_model_len: 8192\n"
                                   "  max_num_batched_tokens: 2048\n"
                                   "  enable_chunked_prefill: false")], []),
    ("python-from-image", [("  memory_gib: 64", "  memory_gib: 64\n  python_from: image")], []),
    ("secret-env-name", [("  max_model_len: 8192", "  max_model_len: 8192\n  env:\n"
                          "    HF_TOKEN: abc")], []),
    ("secret-env-value", [("  max_model_len: 8192", "  max_model_len: 8192\n  env:\n"
                           "    LOG_SINK: hf_abcdefghijklmnopqrstuvwx")], []),
    # the formats people really leak (gitleaks' rules), in a label and in the environment
    ("secret-nvapi-description", [("name: test", "name: test\ndescription: key nvapi-"
                                   "Q7x2Lm9Kp4Rt8Vw1Zs6Yb3Nc5Hd0JfGa7Ue2Io9Pl4Mk1Nj8Bh5Vg3Cf6X")],
     []),
    ("secret-glpat-label", [("  name: registry.example.com/llm/vllm",
                             "  name: registry.example.com/llm/vllm\n  labels:\n"
                             "    com.example.ci: glpat-Xy7Kq2Lm9Np4Rs8Tv1W3")], []),
    ("secret-password-env", [("  max_model_len: 8192", "  max_model_len: 8192\n  env:\n"
                              "    DB_URL: password=hunter2")], []),
    # the model mount must not cover a folder of the image
    ("model-mount-opt", [("model: /models/m", "model: /opt/m")], []),
    ("model-mount-root", [("model: /models/m", "model: /m")], []),
    ("model-path-dotdot", [("model: /models/m", "model: /models/../etc")], []),
    # a label ending in a backslash renders a line hadolint rejects
    ("label-trailing-backslash", [("name: test", "name: test\ndescription: 'a\\'")], []),
    ("tag-placeholder", [("  name: registry.example.com/llm/vllm",
                          '  name: registry.example.com/llm/vllm\n  tags: ["{engine.versoin}"]')],
     []),
    ("ca-cert-missing", [("  memory_gib: 64", "  memory_gib: 64\n  ca_certificates: [corp.crt]")],
     []),
    ("extends-missing", [("name: test", "extends: nothere\nname: test")], []),
    ("abstract-base", [("name: test", "abstract: true\nname: test")], []),
    # --- several problems at once, in file order
    ("many-at-once", [("targets: [h100]", "targets: [a100]"), ('python: "3.12"', "python: 3.10"),
                      ("weights: bf16", "weights: fp8"), ("  name: vllm", "  name: vlm")], []),
    # --- --set overrides
    ("set-bad-value", [], ["serving.port=http"]),
    ("set-unknown-field", [], ["serving.max_model_lenn=1"]),
    ("set-malformed", [], ["serving.port"]),
    ("set-rule", [], ["gpu.targets=[t4]"]),
]





# The exact error lines of each case (warnings are checked elsewhere).
EXPECTED: dict[str, list[str]] = {  # noqa: E501 - regenerated, reviewed
 'yaml-syntax-flow': ["profile.yaml:4:5: YAML syntax error: did not find expected ',' or ']'; "
                      'fix the YAML syntax at this position'],
 'yaml-syntax-indent': ['profile.yaml:6:4: YAML syntax error: did not find expected key; fix '
                        'the YAML syntax at this position'],
 'yaml-duplicate-key': ['profile.yaml:8:1: python: duplicate key (first defined on line 7); '
                        'keep only one of them'],
 'yaml-duplicate-nested': ['profile.yaml:17:3: weights: duplicate key (first defined on line '
                           '15); keep only one of them'],
 'yaml-tab': ['profile.yaml:23:1: YAML syntax error: a tab character; indent with spaces; YAML '
              'does not allow tabs'],
 'yaml-control-char': ['profile.yaml:1:10: character U+007F is not allowed in YAML; remove it '
                       'or write it as an escape in a double-quoted string'],
 'text-bidi-override': ['profile.yaml:2:14: description: must be one line of at most 300 '
                        'printable characters; write it in that form, e.g. `description: one '
                        'line of text` (the allowed form is the pattern of description in '
                        '`dockergen schema`)'],
 'yaml-not-mapping': ['profile.yaml:1:1: a profile must be a mapping of keys to values; write '
                      '`key: value` lines, e.g. `name: h100-fp8`'],
 'yaml-empty': ['profile.yaml:1:1: the profile is empty; start from a shipped profile: '
                'dockergen profiles'],
 'unquoted-python-3.10': ['profile.yaml:7:9: python: 3.10 is a number in YAML (read as 3.1), '
                          'not text; quote it: python: "3.10"'],
 # quoting alone would not do: "13.0" is no CUDA version either (it was the fix before)
 'unquoted-cuda': ['profile.yaml:5:12: cuda.version: 13.0 is a number in YAML (read as 13.0), '
                   "not text; write it as quoted text of the field's form ('13.0' is not a "
                   'CUDA version like "13.0.2")'],
 'unquoted-engine-version-int': ['profile.yaml:10:12: engine.version: 1 is a number in YAML '
                                 '(read as 1), not text; quote it: version: "1"'],
 'unquoted-flash-attn': ['profile.yaml:13:12: flash_attn.version: 2.8 is a number in YAML '
                         '(read as 2.8), not text; quote it: version: "2.8"'],
 'wrong-type-port': ["profile.yaml:20:9: serving.port: expected a whole number, got '8000'; "
                     'write a whole number without quotes'],
 'wrong-type-bool-yes': ['profile.yaml:20:27: serving.enable_chunked_prefill: expected true or '
                         'false, got text; write `enable_chunked_prefill: true` or '
                         '`enable_chunked_prefill: false`'],
 'wrong-type-targets-scalar': ['profile.yaml:3:12: gpu.targets: expected a list, got text; '
                               'write `targets: [h100]`'],
 'wrong-type-section': ['profile.yaml:22:8: build: expected a mapping (indented `key: value` '
                        'lines), got text; write `build:` followed by indented keys'],
 'wrong-type-float-int': ['profile.yaml:19:18: serving.max_model_len: expected a whole number, '
                          'got 8192.5; write a whole number without quotes'],
 'date-as-version': ["profile.yaml:10:12: engine.version: '2024-01-01' is not a release version "
                     'like "0.33.0"; write it in that form, e.g. `version: 0.33.0` (the allowed '
                     'form is the pattern of engine.version in `dockergen schema`)'],
 'unknown-key-typo': ["profile.yaml:13:3: flash_attn.verison: unknown key 'verison' (did you "
                      "mean 'version'?); allowed keys here: build, version, source, max_jobs, "
                      'nvcc_threads, purpose'],
 'unknown-top-level': ["profile.yaml:2:1: engnie: unknown key 'engnie' (did you mean "
                       "'engine'?); allowed keys here: extends, abstract, knowledge, name, "
                       'description, gpu, cuda, python, engine, flash_attn, quantization, '
                       'serving, image, build, packages, runtime, smoke, matrix, observe'],
 'missing-required': ['profile.yaml:18:3: serving.model: required field is missing; add '
                      '`model:` under `serving`'],
 'missing-section': ['profile.yaml:1:1: image: required field is missing; add `image:` at the '
                     'top level'],
 'unknown-choice': ["profile.yaml:9:9: engine.name: 'vlm' is not one of: vllm, tensorrt-llm, "
                    "sglang; did you mean 'vllm'?"],
 'empty-targets': ['profile.yaml:3:12: gpu.targets: must not be empty; list at least one entry, '
                   'e.g. targets: [h100]'],
 'gpu-mem-util-range': ['profile.yaml:20:27: serving.gpu_memory_utilization: 1.5 is out of '
                        'range: must be <= 1.0; use a value <= 1.0'],
 'port-range': ['profile.yaml:20:9: serving.port: 70000 is out of range: must be <= 65535; use '
                'a value <= 65535'],
 'name-shape': ["profile.yaml:1:7: name: 'Test Profile' is not lowercase letters, digits and "
                "'-', starting with a letter or digit; write it in that form, e.g. `name: "
                'h100-fp8` (the allowed form is the pattern of name in `dockergen schema`)'],
 'image-ref-shape': ["profile.yaml:7:16: cuda.devel_image: 'nvidia/cuda:13 ; rm -rf /' is not "
                     'an image reference like '
                     '"registry.example.com/cuda:13.0.2-devel-ubuntu22.04@sha256:<64 hex>"; '
                     'write it in that form, e.g. `devel_image: '
                     'registry.example.com/llm/cuda-base:1.0` (the allowed form is the pattern '
                     'of cuda.devel_image in `dockergen schema`)'],
 'pip-index-credentials': ['profile.yaml:24:18: build.pip_index_url: '
                           "(a value shaped like a credential, not shown) is not an http(s) "
                           'URL without credentials, query or spaces; write it in that form, e.g. '
                           '`pip_index_url: https://mirror.example.com/simple` (the allowed '
                           'form is the pattern of build.pip_index_url in `dockergen schema`)'],
 'max-jobs-bad': ['profile.yaml:14:13: flash_attn.max_jobs: expected "auto" or a whole number '
                  "from 1 to 256, got 'lots'; write max_jobs: auto or a number such as 4"],
 'gpu-unknown': ["profile.yaml:3:13: gpu.targets[0]: unknown GPU 'h10'; did you mean 'h100'? "
                 'use a GPU name (a10, a100, a100-40gb, a10g, b200, b300, gb10, gb200, gh200, '
                 'h100, h100-nvl, h200, l4, l40s, rtx4090, rtx5090, t4, v100) or a compute '
                 'capability like "9.0"'],
 'cc-unknown': ['profile.yaml:3:13: gpu.targets[0]: compute capability 8.7 is not in the '
                'knowledge base; use one of: 7.0, 7.5, 8.0, 8.6, 8.9, 9.0, 10.0, 10.3, 12.0, '
                '12.1'],
 'cuda-unknown': ['profile.yaml:5:12: cuda.version: CUDA 13.0.9 is not in the knowledge base; '
                  'use CUDA 13.0.2 or 13.2.2'],
 'cuda-os': ['profile.yaml:6:7: cuda.os: nvidia/cuda 13.0.2 images are not published for '
             'ubuntu20.04; use cuda.os: ubuntu22.04 or ubuntu24.04'],
 'blackwell-on-cuda-12.4': ['profile.yaml:5:12: cuda.version: CUDA 12.4.1 cannot compile for '
                            'compute capability 10.0 (CUDA >= 12.8 can), but gpu.targets '
                            'includes b200 (10.0); use CUDA 12.8.1 or 12.9.1',
                            'profile.yaml:5:12: cuda.version: flash-attn skips arch 100 '
                            'without an error when nvcc < 12.8; CUDA 12.4.1 would ship no '
                            'kernels for it; use CUDA 12.8.1 or 12.9.1'],
 'volta-on-cuda-13': ['profile.yaml:3:12: gpu.targets: vllm 0.32.0 cannot run on v100 (7.0); its '
                      'compiled kernels carry no code for that compute capability '
                      '(vllm/_C_stable_libtorch.abi3.so: sass_75, sass_80, sass_86, sass_89, '
                      'sass_90, sass_90a, sass_100, sass_120, ptx_80, ptx_89, ptx_90; '
                      'vllm-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl .nv_fatbin '
                      '(tools/kernel_archs.py)), so the server stops at its first kernel with '
                      '"no kernel image is available"; use vllm 0.19.1 and use CUDA 12.9.1, or '
                      'use vllm 0.19.1 and use CUDA 12.8.1',
                      'profile.yaml:5:12: cuda.version: CUDA 13.0.2 dropped compute capability '
                      '7.0 (CUDA <= 12.9 has it), but gpu.targets includes v100 (7.0); use '
                      'CUDA 12.9.1 and use vllm 0.19.1, or use CUDA 12.9.1 and use vllm '
                      '0.17.1'],
 'engine-release-unknown': ['profile.yaml:10:12: engine.version: vllm 0.99.0 is not in the '
                            'knowledge base; use vllm 0.32.0 or 0.31.0, or add the release '
                            "with its source in a knowledge file listed under the profile's "
                            '`knowledge:`, table serving/vllm: releases (`dockergen outdated` '
                            'shows what is known)'],
 'engine-python': ['profile.yaml:7:9: python: vllm 0.32.0 requires Python >=3.11,<3.15, but '
                   'python is 3.10; use Python 3.11 or 3.12'],
 'engine-cuda-major': ['profile.yaml:5:12: cuda.version: vllm 0.32.0 wheels are built for CUDA '
                       '13.x, but cuda.version is 12.8.1; use CUDA 13.0.2 or 13.1.1, or use '
                       'vllm 0.19.1 or 0.17.1'],
 'engine-torch-pin': ['profile.yaml:11:10: engine.torch: vllm==0.32.0 requires torch==2.13.0, '
                      'not 2.14.0; remove engine.torch (it is derived) or change '
                      'engine.version',
                      'profile.yaml:14:12: flash_attn.version: flash-attn 2.8.3 forces '
                      '-std=c++17, but the headers of torch 2.14.0 (which the image gets with '
                      'vllm 0.32.0) require C++20 (compile probe: "#error C++20 or later '
                      'compatible compiler is required to use ATen"); the flash-attn stage '
                      'would fail at its first compile; use vllm 0.31.0, or use vllm 0.30.0, '
                      "or set flash_attn.build: none (vLLM's attention uses its own bundled "
                      'kernels), or build a flash-attn source that carries the fix '
                      '(Dao-AILab/flash-attention PR #2879/#2899, merged after the last '
                      'release): flash_attn.source with url + sha256 (an sdist archive) or git '
                      '+ commit, and cxx_std: 20'],
 'fa2-on-turing': ['profile.yaml:3:12: gpu.targets: FlashAttention-2 needs compute capability '
                   '>= 8.0 (Ampere or newer), but gpu.targets includes t4 (7.5); set '
                   'flash_attn.build: none'],
 'fa2-version-unknown': ['profile.yaml:13:12: flash_attn.version: flash-attn 2.9.0 is not on '
                         'PyPI or not in the knowledge base (releases carry .postN suffixes); '
                         'use flash-attn 2.8.3.post2 or 2.8.3.post1'],
 'fa2-old-cannot-build-blackwell': ['profile.yaml:13:12: flash_attn.version: flash-attn '
                                    '2.7.2.post1 always builds sm_80 and sm_90 only and cannot '
                                    'build 100 (flash-attn >= 2.7.3 can); use flash-attn 2.7.3 '
                                    'or 2.7.4.post1, or set flash_attn.build: none'],
 'fa2-cxx-std-torch-2.14': ['profile.yaml:13:12: flash_attn.version: flash-attn 2.8.3 forces '
                            '-std=c++17, but the headers of torch 2.14.0 (which the image gets '
                            'with vllm 0.33.0) require C++20 (compile probe: "#error C++20 or '
                            'later compatible compiler is required to use ATen"); the '
                            'flash-attn stage would fail at its first compile; use vllm 0.32.0 '
                            "or 0.31.0, or set flash_attn.build: none (vLLM's attention uses "
                            'its own bundled kernels), or build a flash-attn source that '
                            'carries the fix (Dao-AILab/flash-attention PR #2879/#2899, merged '
                            'after the last release): flash_attn.source with url + sha256 (an '
                            'sdist archive) or git + commit, and cxx_std: 20'],
 'fa2-version-not-on-pypi': ['profile.yaml:13:12: flash_attn.version: flash-attn 2.7.4 is not '
                             'on PyPI or not in the knowledge base (releases carry .postN '
                             'suffixes); use flash-attn 2.7.4.post1 or 2.7.3'],
 'fa2-source-still-cxx17': ['profile.yaml:14:11: flash_attn.source: flash_attn.source forces '
                            '-std=c++17, but the headers of torch 2.14.0 (which the image gets '
                            'with vllm 0.33.0) require C++20 (compile probe: "#error C++20 or '
                            'later compatible compiler is required to use ATen"); the '
                            'flash-attn stage would fail at its first compile; use vllm 0.32.0 '
                            "or 0.31.0, or set flash_attn.build: none (vLLM's attention uses "
                            'its own bundled kernels), or build a flash-attn source that '
                            'carries the fix (Dao-AILab/flash-attention PR #2879/#2899, merged '
                            'after the last release): flash_attn.source with url + sha256 (an '
                            'sdist archive) or git + commit, and cxx_std: 20'],
 'fa2-source-two-kinds': ['profile.yaml:14:11: flash_attn.source: give either url + sha256 (an '
                          'archive) or git + commit; e.g. `source: {git: '
                          'https://github.com/Dao-AILab/flash-attention, commit: <40 hex>}`'],
 'fa2-memory': ['profile.yaml:14:13: flash_attn.max_jobs: 16 jobs need about 144 GiB (9 GiB '
                'per flash-attn compile job at NVCC_THREADS=4), but build.memory_gib is 64; '
                'use max_jobs: auto (= 7), or raise build.memory_gib'],
 'fp8-trtllm-ampere': ['profile.yaml:15:12: quantization.weights: fp8 needs compute capability '
                       '>= 8.9 on tensorrt-llm, but gpu.targets includes a100 (8.0); use '
                       'weights: fp16 or bf16'],
 'bf16-on-turing': ['profile.yaml:15:12: quantization.weights: bf16 needs compute capability '
                    '>= 8.0 on vllm, but gpu.targets includes t4 (7.5); use weights: fp16 or '
                    'int8'],
 'kv-int8-vllm': ['profile.yaml:16:13: quantization.kv_cache: vllm has no int8 KV cache; use '
                  'kv_cache: auto or fp8'],
 'batched-tokens-below-len': ['profile.yaml:20:27: serving.max_num_batched_tokens: 2048 is '
                              'below max_model_len (8192) with chunked prefill disabled; the '
                              'server refuses to start; raise it to >= max_model_len or enable '
                              'chunked prefill'],
 'python-from-image': ['profile.yaml:24:16: build.python_from: ubuntu22.04 ships Python 3.10, '
                       'but python is 3.12; use build.python_from: uv, or use cuda.os: ubuntu24.04 '
                       '(its python3 is 3.12)'],
 'secret-env-name': ['profile.yaml:21:15: serving.env.HF_TOKEN: HF_TOKEN looks like a secret '
                     'and would be readable by anyone who pulls the image; pass it when the '
                     'container starts (docker run -e HF_TOKEN) instead'],
 'secret-env-value': ['profile.yaml:21:15: serving.env.LOG_SINK: the value looks like a '
                      'credential and would be readable by anyone who pulls the image; pass it '
                      'when the container starts (docker run -e LOG_SINK) instead'],
 'secret-nvapi-description': ['profile.yaml:2:14: description: the value looks like a '
                              'credential and would be readable by anyone who pulls the '
                              'image (it becomes a label); never put credentials in '
                              'labels or the description'],
 'secret-glpat-label': ['profile.yaml:23:21: image.labels.com.example.ci: the value looks'
                        ' like a credential and would be readable by anyone who pulls the'
                        ' image (it becomes a label); never put credentials in labels or '
                        'the description'],
 'secret-password-env': ['profile.yaml:21:13: serving.env.DB_URL: the value looks like a '
                         'credential and would be readable by anyone who pulls the image;'
                         ' pass it when the container starts (docker run -e DB_URL) '
                         'instead'],
 'model-mount-opt': ['profile.yaml:18:10: serving.model: the model is mounted read-only '
                     'at its parent folder /opt, which covers /opt/venv of the image (the'
                     ' entrypoint needs what is there); put the model in a folder of its '
                     'own, e.g. serving.model: /models/m'],
 'model-mount-root': ['profile.yaml:18:10: serving.model: the model is mounted read-only '
                      'at its parent folder, here / (the whole image, which the '
                      'entrypoint needs); put the model in a folder of its own, e.g. '
                      'serving.model: /models/m'],
 'model-path-dotdot': ["profile.yaml:18:10: serving.model: '/models/../etc' is not a "
                       "normalised path (no '..', '.', '//' or trailing '/'); put the "
                       'model in a folder of its own, e.g. serving.model: /models/etc'],
 'label-trailing-backslash': ['profile.yaml:2:14: description: must not end with a '
                              'backslash (the Dockerfile label would end in \\\\", which '
                              'hadolint rejects): remove the trailing backslash; write it in '
                              'that form, e.g. `description: one line of text` (the allowed '
                              'form is the pattern of description in `dockergen schema`)'],
 'tag-placeholder': ['profile.yaml:22:10: image.tags[0]: unknown placeholder '
                     "'{engine.versoin}'; use {name}, {engine.name}, {engine.version}, "
                     '{cuda.version}, {cuda.major_minor}, {python}, {quantization.weights}, '
                     '{quantization.kv_cache}'],
 'ca-cert-missing': ['profile.yaml:24:21: build.ca_certificates[0]: corp.crt does not exist '
                     'next to profile.yaml; give a path relative to the profile file'],
 'extends-missing': ["profile.yaml:1:10: extends: no profile named 'nothere' next to "
                     'profile.yaml or among the shipped profiles; use one of: a100-bf16, '
                     'a100-h100, base, fleet, gh200-vllm, h100-fp8, h100-sglang-fp8, '
                     'h100-standalone, h100-trtllm-fp8, l40s-awq'],
 'abstract-base': ['profile.yaml:1:11: abstract: this profile only provides defaults for '
                   'others; render a profile that says `extends: profile`'],
 'many-at-once': ['profile.yaml:7:9: python: 3.10 is a number in YAML (read as 3.1), not text; '
                  'quote it: python: "3.10"',
                  "profile.yaml:9:9: engine.name: 'vlm' is not one of: vllm, tensorrt-llm, "
                  "sglang; did you mean 'vllm'?"],
 'set-bad-value': ["--set serving.port: serving.port: expected a whole number, got 'http'; "
                   'write a whole number without quotes'],
 'set-unknown-field': ['--set serving.max_model_lenn: serving.max_model_lenn: unknown key '
                       "'max_model_lenn' (did you mean 'max_model_len'?); allowed keys here: "
                       'model, served_model_name, host, port, max_model_len, '
                       'gpu_memory_utilization, max_num_batched_tokens, max_num_seqs, '
                       'enable_chunked_prefill, tensor_parallel_size, extra_args, env, '
                       'health_start_period_s, hf_config'],
 'set-malformed': ['--set serving.port: expected FIELD.PATH=VALUE; e.g. --set '
                   'serving.max_model_len=16384'],
 'set-rule': ['--set gpu.targets: gpu.targets: FlashAttention-2 needs compute capability >= '
              '8.0 (Ampere or newer), but gpu.targets includes t4 (7.5); set flash_attn.build: '
              'none',
              'profile.yaml:15:12: quantization.weights: bf16 needs compute capability >= 8.0 '
              'on vllm, but gpu.targets includes t4 (7.5); use weights: fp16 or int8']}
