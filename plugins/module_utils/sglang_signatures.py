# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one table of SGLang-version-specific knowledge used while waiting.

Startup phases (lenient patterns, stable names, human labels), fatal failure
signatures (pattern, short name, hint) and warnings known to be harmless.
Everything that depends on what a given SGLang release prints lives here, so a
new release means editing this file and its tests, nothing else.

Pure data and small helpers: no I/O, importable on Python 3.8+ on the managed
node and on the controller (a live progress display imports PHASES).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import namedtuple

# The SGLang release this table was checked against (tests/conformance fetches exactly this wheel and holds every
# row below against its source); the one place for it and the packages pinned with it is module_utils/pins.py.
from ansible_collections.llmops.sglang.plugins.module_utils.pins import PINS, RELEASE  # noqa: F401 (RELEASE: API)
from ansible_collections.llmops.sglang.plugins.module_utils import secret_flags

# Where a row's text comes from. origin: for SGLang's own text a path relative to sglang/srt/ of the RELEASE wheel and
# line the 1-based line there that holds text, verbatim (an f-string or %-format fragment as written in the source);
# for text of other programs their true origin ('argparse (CPython 3.11)', 'uvicorn==0.54.0:uvicorn/server.py',
# 'gcc', 'torch', 'NCCL', ...) with the line in that file when it is one, else None. tests/conformance checks every
# SGLang line against the wheel (a new release names exactly the rows whose lines moved), renders it with sample
# values and feeds it through this table; the other origins are rendered by running the real thing where it can run.
Source = namedtuple('Source', ['origin', 'line', 'text'])

# name: stable identifier other components rely on; label: for humans;
# pattern: compiled regex searched in a journal line (prefix included);
# stall_hint: what usually explains a stall in this phase; sources: the lines of the release it recognises.
Phase = namedtuple('Phase', ['name', 'label', 'pattern', 'stall_hint', 'sources'])

# Ordered: a phase only ever moves forward within one run of the unit.
# Patterns are deliberately lenient (releases rename lines: older ones said "Init torch distributed", "Capture cuda
# graph begin"); they feed progress and stall detection only, never the readiness decision.
PHASES = (
    Phase('init', 'distributed init',
          re.compile(r'Init parallel (?:begin|ends)|(?i:init(?:ialize)? torch distributed)'),
          'Distributed init hangs when a rank cannot reach the others: check NCCL_* / GLOO_SOCKET_IFNAME, '
          '--dist-init-addr and that no other server holds the port range.',
          (Source('distributed/bootstrap.py', 115, 'Init parallel begin.'),
           Source('distributed/bootstrap.py', 190, 'Init parallel ends. elapsed={time.perf_counter() - tic:.2f} s'))),
    Phase('weights', 'loading weights',
          re.compile(r'(?i)load(?:ing)? weights? begin|loading safetensors checkpoint shards'),
          'Weight loading is bound by disk or network speed: check the model directory is local and readable, '
          'and raise stall_timeout for very large checkpoints on slow storage.',
          (Source('model_executor/model_runner.py', 1274,
                  'Load weight begin. avail mem={get_available_gpu_memory(self.device, self.gpu_id):.2f} GB'),
           Source('model_loader/weight_utils.py', 1166, 'desc="Loading safetensors checkpoint shards",'))),
    Phase('kv_cache', 'allocating KV cache',
          re.compile(r'(?i)load weights? end|KV Cache is allocated|Memory pool end'),
          'KV cache allocation should take seconds: look for memory errors on the GPUs (nvidia-smi, dmesg).',
          (Source('model_executor/model_runner.py', 1373, 'Load weight end. '),
           Source('mem_cache/memory_pool.py', 2088, "{cache_name} {'VA upper bound' if self.post_capture_active else "
                  "'is allocated'}. dtype: {self.dtype}, "),
           Source('mem_cache/memory_pool.py', 2096, "{cache_name} {'VA upper bound' if self.post_capture_active else "
                  "'is allocated'}. dtype: {self.dtype}, "),
           Source('mem_cache/kv_cache_configurator.py', 499, 'Memory pool end. '))),
    # Only the capture's own begin/end lines: start-up warnings that merely mention CUDA graphs or DeepGEMM JIT
    # (arg_groups/cuda_graph_hook.py:299 "Disabling prefill CUDA graph ... a captured prefill graph" for DeepSeek-V3
    # on trtllm_mla, arg_groups/serving_hook.py:486) come before init and must not skip the phases in between.
    Phase('cuda_graph', 'capturing CUDA graphs',
          re.compile(r'(?i)\bcapture\b[^.]*\bgraph (?:begin|end)\b|Capturing batches|DeepGEMM JIT (?:Pre-Compile|Compiling)'),
          'DeepGEMM/Triton JIT and CUDA graph capture can take 10-20 minutes on a cold cache: persist '
          '~/.cache/deep_gemm and ~/.triton across restarts, or raise stall_timeout.',
          (Source('model_executor/model_runner_components/cuda_graph_setup.py', 759,
                  'Capture {capture_name} {graph_backend[model_runner.device]} begin. '),
           Source('model_executor/model_runner_components/cuda_graph_setup.py', 788,
                  'Capture {capture_name} {graph_backend[model_runner.device]} end. '),
           Source('model_executor/model_runner_components/cuda_graph_setup.py', 685,
                  'Capture {capture_name} CUDA graph begin. '),
           Source('model_executor/model_runner_components/cuda_graph_setup.py', 696,
                  'Capture {capture_name} CUDA graph end. '),
           Source('speculative/eagle_worker_v2.py', 515, 'Capture draft decode CUDA graph begin. backend={decode_backend}, '),
           Source('speculative/eagle_worker_v2.py', 634, 'Capture draft extend CUDA graph begin. backend={decode_backend}, '),
           Source('speculative/multi_layer_eagle_draft_extend_cuda_graph_runner.py', 632,
                  'Capture draft extend CUDA graph begin. step={step}, '),
           Source('speculative/frozen_kv_mtp_worker_v2.py', 396, 'Capture Frozen-KV MTP draft cuda graph begin.'),
           Source('speculative/uno_worker_v2.py', 166, 'Capture UNO tree draft CUDA graph begin. '),
           Source('layers/deep_gemm_wrapper/compile_utils.py', 170, 'Entering DeepGEMM JIT Pre-Compile session. '),
           Source('layers/deep_gemm_wrapper/compile_utils.py', 180, 'Try DeepGEMM JIT Compiling for '),
           Source('model_executor/runner/decode_cuda_graph_runner.py', 1343,
                  'Capturing batches ({bs=} {avail_mem=:.2f} GB)'))),
    Phase('http_up', 'starting HTTP server',
          re.compile(r'Started server process|Waiting for application startup|Application startup complete|Uvicorn running on'),
          'The scheduler is up but the HTTP server did not finish starting: check the port is free.',
          (Source('uvicorn==0.54.0:uvicorn/server.py', 101, 'Started server process [%d]'),
           Source('uvicorn==0.54.0:uvicorn/lifespan/on.py', 48, 'Waiting for application startup.'),
           Source('uvicorn==0.54.0:uvicorn/lifespan/on.py', 62, 'Application startup complete.'),
           Source('uvicorn==0.54.0:uvicorn/server.py', 232, 'Uvicorn running on {addr_format} (Press CTRL+C to quit)'),
           Source('entrypoints/http_server.py', 3072, 'f"Uvicorn running on {config.host}:{config.port} "'))),
    # The warmup thread polls GET /model_info every second, 120 times (entrypoints/http_server.py:2370-2379), then
    # sends one request; uvicorn's access log shows both.
    Phase('warmup', 'warming up',
          re.compile(r'"GET /model_info HTTP/1\.[01]"|"POST /generate HTTP/1\.[01]"|Prefill batch'),
          'The warmup request is stuck: SGLANG_WARMUP_TIMEOUT (default 600 s) bounds it; check the scheduler lines above.',
          (Source('uvicorn==0.54.0:uvicorn/config.py', 94,
                  '"fmt": \'%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s\','),
           Source('entrypoints/http_server.py', 2374, 'url + "/model_info", timeout=5, headers=headers, verify=ssl_verify'),
           Source('managers/scheduler_components/metrics_reporter.py', 754, 'Prefill batch{iter_msg}, '))),
    Phase('ready', 'ready',
          re.compile(r'The server is fired up and ready to roll'),
          '',
          (Source('entrypoints/http_server.py', 2600, 'The server is fired up and ready to roll!'),)),
)

PHASE_NAMES = tuple(p.name for p in PHASES)
_PHASE_INDEX = dict((p.name, i) for i, p in enumerate(PHASES))

# name: short identifier; pattern: regex searched in the line; hint: the fix a user
# needs (may use the pattern's named groups with str.format); generic: a marker that
# something failed without saying what (used only when nothing specific matched); sources: as for Phase.
Signature = namedtuple('Signature', ['name', 'pattern', 'hint', 'generic', 'sources'])

_ARGPARSE = 'argparse (CPython 3.11)'
# The transformers release SGLang 0.5.23 pins (its Requires-Dist), whose messages the model rows read.
_TRANSFORMERS = 'transformers==5.19.0:transformers/'

# Order is priority: when several signatures match lines of the failed run, the
# earliest row names the cause (root causes first, cascades and generic markers last).
FATAL_SIGNATURES = (
    Signature('python_headers',
              re.compile(r'fatal error: Python\.h: No such file or directory'),
              'Triton compiles a C helper at start-up and needs the Python headers: install python3-dev AND '
              'python3.X-dev for the Python version X of the server\'s venv.',
              False,
              (Source('gcc (Triton builds its cuda_utils.c helper with #include <Python.h>)', None,
                      '%(file)s:%(line)d:%(col)d: fatal error: Python.h: No such file or directory'),)),
    # The family: a checkpoint's quantization config (format, type, strategy, scheme) that the installed
    # compressed-tensors does not know, as CPython's enum words it, or that SGLang finds no scheme for (a linear
    # layer's, compressed_tensors.py:862, or a fused MoE's, :1004).
    Signature('compressed_tensors_too_old',
              re.compile(r"AttributeError:.*nvfp4_pack_quantized|is not a valid (?:CompressionFormat|QuantizationType|"
                         r"QuantizationStrategy|ActivationOrdering|DynamicType|QuantizationMetadata)\b|"
                         r"Quantization scheme is not supported for |Unsupported FusedMoe scheme: |"
                         r"No compressed-tensors compatible scheme was found"),
              'The checkpoint\'s quantization config uses a format or scheme that the installed compressed-tensors '
              '(or this SGLang on this GPU) does not know: install the version SGLang pins (%s pins '
              'compressed-tensors==%s; nvfp4-pack-quantized needs >= 0.10.0) in the server\'s venv; if it is already '
              'that version, the checkpoint needs a newer SGLang or another GPU.'
              % (RELEASE, PINS['compressed-tensors']),
              False,
              (Source('layers/quantization/compressed_tensors/utils.py', 18,
                      'CompressionFormat.nvfp4_pack_quantized.value,'),
               Source('layers/quantization/compressed_tensors/compressed_tensors.py', 423,
                      '"Quantization scheme is not supported for ",'),
               Source('layers/quantization/quark/quark.py', 791, '"Quantization scheme is not supported for "'),
               Source('layers/quantization/compressed_tensors/compressed_tensors.py', 862,
                      'raise NotImplementedError("No compressed-tensors compatible scheme was found.")'),
               Source('layers/quantization/compressed_tensors/compressed_tensors.py', 1004,
                      'f"Unsupported FusedMoe scheme: {weight_quant}, {input_quant}"'),
               Source('enum (CPython 3.11): a compressed-tensors without the member', None,
                      "AttributeError: nvfp4_pack_quantized / ValueError: %r is not a valid CompressionFormat"))),
    Signature('unrecognized_arguments',
              re.compile(r'error: unrecognized arguments: (?P<args>.*)'),
              'This SGLang version does not know the flag(s) {args}: remove or rename them in the unit\'s command line.',
              False,
              (Source(_ARGPARSE, None, 'unrecognized arguments: %s'),)),
    Signature('bad_argument',
              re.compile(r'\S+: error: (?:argument \S+|the following arguments are required|ambiguous option: '
                         r'(?P<option>\S+) could match (?P<matches>.*))'),
              'A flag has a wrong value, is missing or is abbreviated: fix the unit\'s command line as the error says '
              '(spell flags out in full: argparse takes a unique prefix, and a new release makes it ambiguous).',
              False,
              (Source(_ARGPARSE, None, 'argument %(argument_name)s: %(message)s'),
               Source(_ARGPARSE, None, 'the following arguments are required: %s'),
               Source(_ARGPARSE, None, 'ambiguous option: %(option)s could match %(matches)s'))),
    Signature('missing_module',
              re.compile(r"ModuleNotFoundError: No module named '(?P<module>[^']+)'"),
              'Python module {module} is missing from the server\'s venv: install it (or the SGLang extra that brings it).',
              False,
              (Source('import system (CPython 3.11)', None, "ModuleNotFoundError: No module named '%s'"),)),
    # SGLang's own words for a package it needs and cannot import (it catches the ImportError and raises "please
    # install X", "X is not installed", "Install it with: pip install ..."), or one older than it needs
    # (utils/common.py:2422 assert_pkg_version: sglang-kernel at every CUDA start, flashinfer for its backends).
    # Only the last line of the traceback ("ImportError: ..."): the same words in a logged record are warnings SGLang
    # carries on past (an optional package of another feature, models/registry.py:132's "Ignore import error when
    # loading ...: Please install timm"), never the cause.
    Signature('missing_package',
              re.compile(r'^(?:[\w.]+\.)?(?:[A-Z]\w*)?(?:Error|Exception): .*(?i:\bplease install\b|\binstall it with\b|'
                         r'\bpip install |\bis not installed\b|\bpackage (?:is )?missing\b|'
                         r'\bless than the minimum required version\b)'),
              'A package that a selected feature, backend or checkpoint needs is missing from the server\'s venv, or is '
              'older than SGLang needs: install the one the message names (as it says, or the SGLang extra that brings '
              'it) at the version SGLang %s pins, or drop the flag that selected the feature.' % RELEASE,
              False,
              (Source('arg_groups/serving_hook.py', 111,
                      '"--enable-http2 requires the \'granian\' package. "'),
               Source('checkpoint_engine/checkpoint_engine_worker.py', 32,
                      '"checkpoint-engine is not installed. "'),
               Source('configs/deepseek_ocr.py', 179,
                      '"Please install torchvision via `pip install torchvision` to use Deepseek-VL2."'),
               Source('configs/deepseekvl2.py', 93,
                      '"Please install torchvision via `pip install torchvision` to use Deepseek-VL2."'),
               Source('connector/azure.py', 80,
                      '"AzureBlobConnector requires the \'blobfile\' package. "'),
               Source('disaggregation/nixl/conn.py', 546,
                      '"Please install NIXL by following the instructions at "'),
               Source('disaggregation/nixl/conn.py', 626,
                      'f"NIXL backend \'{backend}\' not found. Available: {available_plugins}. "'),
               Source('distributed/device_communicators/mooncake_transfer_engine.py', 123,
                      '"Please install mooncake by following the instructions at "'),
               Source('distributed/device_communicators/mooncake_transfer_engine.py', 262,
                      '"Mooncake\'s batch transfer requires mooncake-transfer-engine "'),
               Source('dllm/config.py', 144,
                      '"Please install PyYAML to use YAML config files. "'),
               Source('entrypoints/grpc_server.py', 163,
                      '"gRPC mode requires the smg-grpc-servicer package. "'),
               Source('entrypoints/openai/serving_rerank.py', 127,
                      '"Rendering Qwen3 reranker prompts requires `jinja2`. "'),
               Source('hardware_backend/mlx/runtime.py', 36,
                      '"SGLANG_USE_MLX requires stable Torch 2.13.x and MLX >= 0.32.0, "'),
               Source('layers/attention/linear/kernels/kda_flashkda.py', 23,
                      '"The \'flashkda\' KDA prefill backend requires the flash_kda module, "'),
               Source('layers/attention/linear/kernels/kda_helion.py', 45,
                      '"The Helion package is required when a KDA backend is set to "'),
               Source('layers/moe/kt_ep_wrapper.py', 149,
                      '"kt_kernel is not installed. To use KTransformers EP wrapper, please install kt_kernel."'),
               Source('layers/moe/moe_runner/flashinfer_cutedsl.py', 321,
                      '"flashinfer_cutedsl backend requires FlashInfer with CuteDSL support. "'),
               Source('layers/moe/token_dispatcher/flashinfer.py', 160,
                      '"Flashinfer is not installed or does not support A2A. "'),
               Source('layers/moe/token_dispatcher/mooncake.py', 142,
                      '"Mooncake EP is not installed. Please install Mooncake package at "'),
               Source('layers/moe/token_dispatcher/moriep.py', 962,
                      'raise ImportError("Mori EP is not installed. Please install.")'),
               Source('layers/moe/token_dispatcher/nixl.py', 44,
                      '"NixlEP is not installed. Please install NixlEP package from "'),
               Source('layers/moe/token_dispatcher/pplx.py', 205,
                      '"pplx-kernels is not installed. Please build and install it "'),
               Source('layers/quantization/bitsandbytes.py', 35,
                      '"bitsandbytes version is wrong. Please install bitsandbytes>=0.46.1."'),
               Source('layers/quantization/bitsandbytes.py', 39,
                      '"Please install bitsandbytes>=0.46.1 via "'),
               Source('layers/quantization/bitsandbytes.py', 439,
                      '"bitsandbytes version is wrong. Please "'),
               Source('layers/quantization/bitsandbytes.py', 444,
                      '"Please install bitsandbytes>=0.46.1 via "'),
               Source('layers/quantization/fp8_utils.py', 872,
                      '"MXFP8 dense GEMM requested via --fp8-gemm-backend=deep_gemm, but "'),
               Source('layers/quantization/fp8_utils.py', 1157,
                      '"DeepGEMM backend requested via --fp8-gemm-backend=deep_gemm, "'),
               Source('layers/quantization/modelopt_quant.py', 163,
                      '"NVFP4 GEMM requires flashinfer\'s mm_fp4; please install flashinfer."'),
               Source('layers/quantization/mxfp4.py', 300,
                      '"The package `amd-quark` is required to use "'),
               Source('layers/quantization/petit_utils.py', 19,
                      '"Petit is not installed. Please install it with `pip install petit-kernel`."'),
               Source('layers/quantization/petit_utils.py', 32,
                      '"Petit is not installed. Please install it with `pip install petit-kernel`."'),
               Source('mem_cache/storage/flexkv/flexkv_connector.py', 58,
                      '"FlexKV is not installed. Please install the FlexKV package to use "'),
               Source('mem_cache/storage/hf3fs/hf3fs_usrbio_client.py', 72,
                      '"hf3fs_fuse.io is not available. Please install the hf3fs_fuse package."'),
               Source('mem_cache/storage/mooncake_store/mooncake_store.py', 294,
                      '"Please install mooncake by following the instructions at "'),
               Source('mem_cache/storage/mooncake_store/mooncake_store.py', 501,
                      '"MooncakeStore with standalone_storage=True requires MooncakeHostTensorAllocator. "'),
               Source('mem_cache/storage/nixl/hicache_nixl.py', 32,
                      '"Please install NIXL by following the instructions at "'),
               Source('mem_cache/storage/npu_memcache/npu_memcache_store.py', 172,
                      '"Ascend MemCache HiCache backend requires `memcache_hybrid`. "'),
               Source('mem_cache/storage/simm/hicache_simm.py', 26,
                      '"Please install simm by following the instructions at https://github.com/scitix/SiMM "'),
               Source('model_executor/runner_backend_utils/breakable_cuda_graph/breakable_cuda_graph.py', 56,
                      '"Breakable CUDA graph on NVIDIA requires the \'cuda-python\' package. "'),
               Source('model_executor/runner_backend_utils/breakable_cuda_graph/cuda_utils.py', 36,
                      '"cuda.bindings is not available. Install it with: pip install cuda-python"'),
               Source('model_loader/loader.py', 925,
                      '"accelerate is required for ModelOpt quantization. "'),
               Source('model_loader/loader.py', 2689,
                      '"bitsandbytes version is wrong. Please "'),
               Source('model_loader/loader.py', 2694,
                      '"Please install bitsandbytes>=0.44.0 via "'),
               Source('model_loader/loader.py', 3056,
                      '"Please install gguf via `pip install gguf` to use gguf quantizer."'),
               Source('model_loader/loader.py', 3683,
                      '"ModelOpt is not available. Please install modelopt."'),
               Source('model_loader/weight_utils.py', 1218,
                      '\'Please install InstantTensor via `pip install "instanttensor>=0.1.9"`.\''),
               Source('model_loader/weight_utils.py', 1280,
                      '"Please install fastsafetensors via `pip install fastsafetensors`"'),
               Source('models/deepseek_vl2.py', 229,
                      'raise ImportError("Please install timm") from ImportError'),
               Source('models/voxtral.py', 256,
                      '"mistral_common is required for Voxtral. "'),
               Source('multimodal/processors/mimo_audio.py', 211,
                      '"torchcodec is required for audio decoding; install with `pip install torchcodec`."'),
               Source('observability/ray_wrappers.py', 90,
                      '"RayPrometheusMetric requires Ray to be installed. "'),
               Source('observability/trace.py', 222,
                      '"opentelemetry package is not installed!!! Please not enable tracing or install opentelemetry"'),
               Source('platforms/__init__.py', 119,
                      'f"SGLANG_PLATFORM={selected!r} not found in discovered platform plugins "'),
               Source('utils/common.py', 1215,
                      '"NPU detected, but torchair package is not installed. "'),
               Source('utils/common.py', 2430,
                      'f"{pkg} is installed with version {installed_version}, which "'),
               Source('utils/common.py', 2435,
                      'f"{pkg} with minimum required version {min_version} is not installed. "'),
               Source('utils/hf_transformers/tokenizer.py', 461,
                      '"The fastokens package is required when --tokenizer-backend=fastokens. "'),
               Source('utils/network.py', 331,
                      '"Environment variable SGLANG_LOCAL_IP_NIC requires package netifaces, please install it through'),)),
    Signature('model_path',
              re.compile(r"does not appear to have a file named|is not a local folder and is not a valid model identifier|"
                         r"Can't load the configuration of|No such file or directory: '[^']*config\.json'"),
              'The model could not be found: check --model-path points at a complete local checkpoint readable by the service user.',
              False,
              (Source(_TRANSFORMERS + 'utils/hub.py', 471,
                      'f"{path_or_repo_id} does not appear to have a file named {filename}. Checkout "'),
               Source(_TRANSFORMERS + 'utils/hub.py', 570,
                      'f"{path_or_repo_id} is not a local folder and is not a valid model identifier "'),
               Source(_TRANSFORMERS + 'configuration_utils.py', 865,
                      'f"Can\'t load the configuration of \'{pretrained_model_name_or_path}\'. If you were trying to load it"'),
               Source('OSError (CPython 3.11) opening the checkpoint', None,
                      "FileNotFoundError: [Errno 2] No such file or directory: '%s/config.json'"))),
    # A shard the index names that is not there, or a safetensors file cut short (an interrupted copy).
    Signature('checkpoint_incomplete',
              re.compile(r'references \S+ shard file\(s\) missing from|Error while deserializing header|'
                         r'Cannot find any model weights with|No model weights found in|'
                         r'incomplete metadata, file not fully covered|MetadataIncompleteBuffer'),
              'The checkpoint is incomplete: a shard is missing or cut short (an interrupted download or copy). Compare '
              'the model directory with model.safetensors.index.json and the files\' sizes with the source, copy the '
              'missing or short shards again.',
              False,
              (Source('model_loader/loader.py', 581, 'f"Cannot find any model weights with `{model_name_or_path}`"'),
               Source('model_loader/loader.py', 2644, 'raise RuntimeError(f"No model weights found in: `{model_name_or_path}`")'),
               Source('model_loader/loader.py', 2662, 'f"Cannot find any model weights with `{model_name_or_path}`"'),
               Source('model_loader/loader.py', 4046, 'f"Cannot find any model weights with `{model_name_or_path}`"'),
               Source('models/clip.py', 670, 'f"Cannot find any model weights with `{model_name_or_path}`"'),
               Source('models/mimo_audio.py', 1368, 'f"No model weights found in {path} "'),
               Source('model_loader/weight_utils.py', 802,
                      'f"{index_file} references {len(missing_files)} shard file(s) missing "'),
               Source('safetensors==0.8.0 (Rust, _safetensors_rust.abi3.so: SafeTensorError::MetadataIncompleteBuffer)',
                      None, 'safetensors_rust.SafetensorError: Error while deserializing header: incomplete metadata, '
                      'file not fully covered'))),
    # transformers 5 words it "requires you to execute custom code" / "pass the argument `trust_remote_code=True`"
    # (the second line of its message); SGLang's own tokenizer loader wraps it; older releases said "execute the
    # configuration file".
    Signature('trust_remote_code',
              re.compile(r'requires you to execute (?:the (?:configuration|modeling|tokenizer) file|custom code)|'
                         r'(?:set the option|pass the argument) `trust_remote_code=True`|'
                         r'Failed to load the tokenizer\. If the tokenizer is a custom tokenizer'),
              'This model ships its own code: add --trust-remote-code to the server\'s flags.',
              False,
              (Source('utils/hf_transformers/tokenizer.py', 203, '"Failed to load the tokenizer. If the tokenizer is a custom "'),
               Source(_TRANSFORMERS + 'dynamic_module_utils.py', 703,
                      '"Loading this model requires you to execute custom code contained in the model repository on your local "'),
               Source(_TRANSFORMERS + 'dynamic_module_utils.py', 790,
                      'f"Please pass the argument `trust_remote_code=True` to allow custom code to be run."'))),
    # No GPU visible to the server: SGLang's own checks and torch's when the driver or the device nodes are missing.
    Signature('no_gpu',
              re.compile(r'No CUDA devices found via torch\.cuda|No (?:supported )?accelerator \((?:CUDA|XPU)|'
                         r'Found no NVIDIA driver on your system|CUDA driver initialization failed|'
                         r'CUDA driver version is insufficient for CUDA runtime version'),
              'The server sees no usable GPU: check `nvidia-smi` on the host (driver loaded, GPUs healthy), '
              'CUDA_VISIBLE_DEVICES in the unit\'s environment, that the service user can open /dev/nvidia*, and that '
              'the driver is new enough for the CUDA of the venv\'s torch.',
              False,
              (Source('utils/common.py', 784, 'raise RuntimeError(f"{reason} No CUDA devices found via torch.cuda.")'),
               Source('utils/common.py', 628, 'raise RuntimeError("No supported accelerator (CUDA/XPU) available")'),
               Source('utils/common.py', 1125, '"No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available."'),
               Source('torch (torch/cuda/__init__.py _lazy_init, via _cuda_init)', None,
                      'RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and '
                      'installed a driver from http://www.nvidia.com/Download/index.aspx'),
               Source('CUDA runtime (cudaErrorInsufficientDriver, via torch)', None,
                      'RuntimeError: The NVIDIA driver on your system is too old (found version 12020). CUDA driver '
                      'version is insufficient for CUDA runtime version'))),
    Signature('no_kernel_image',
              re.compile(r'no kernel image is available for execution on the device'),
              'A CUDA binary was not built for this GPU architecture: install torch / sgl-kernel / SGLang builds for this GPU (e.g. sm_100/sm_103).',
              False,
              (Source('CUDA runtime (cudaErrorNoKernelImageForDevice, via torch)', None,
                      'CUDA error: no kernel image is available for execution on the device'),)),
    Signature('scheduler_oom_killed',
              re.compile(r'scheduler died during initialization \(exit code: -9\)'),
              'A scheduler was SIGKILLed (-9), usually by the kernel OOM killer on host RAM: check `journalctl -k | grep -i oom`, '
              'free host memory or lower the load-time memory use.',
              False,
              (Source('entrypoints/engine.py', 2006, 'f"Rank {rank} scheduler died during initialization "'),
               Source('entrypoints/engine.py', 2007, 'f"(exit code: {proc.exitcode}). "'))),
    Signature('gpu_memory_unbalanced',
              re.compile(r'The memory capacity is unbalanced\. Some GPUs may be occupied by other processes'),
              'Some GPUs have less free memory than the others: another process holds memory on them (often a previous '
              'server that did not exit). Find it in nvidia-smi\'s process list and stop it.',
              False,
              (Source('distributed/bootstrap.py', 445,
                      'msg = "The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "'),)),
    # The family: the memory budget a start computes for the KV cache (or a pool beside it: a hybrid model's state
    # cache, its int8 checkpoint pool, the unified pool's worst-case request) is too small, or a batch ran out of it.
    Signature('not_enough_memory',
              re.compile(r'Not enough memory\. Please try to increase --mem-fraction-static|'
                         r'leaves? no (?:room for the full KV pool|GPU memory for the KV cache)|Not enough GPU memory for |'
                         r'\b(?:Prefill |Decode )?[Oo]ut of memory\. Try to lower your batch size|'
                         r'alloc_req_slots runs out of memory|'
                         r'Hybrid \(mamba/linear-attention\) state cache is too small to serve|HBM is free\. Lower |'
                         r'cannot fit ONE worst-case request'),
              'GPU memory left for the KV cache is too small: raise --mem-fraction-static a little, lower --context-length, '
              'or use more GPUs (--tp-size); when it happens while serving, lower --max-running-requests. A pool beside '
              'the KV cache (a hybrid model\'s state or checkpoint pool) names its own flags in the message: follow it.',
              False,
              (Source('model_executor/pool_configurator.py', 96, 'Not enough memory. Please try to increase --mem-fraction-static.'),
               Source('mem_cache/kv_cache_configurator.py', 3051, 'f"Loaded weights leave no GPU memory for the KV cache under "'),
               Source('mem_cache/allocation.py', 163, 'f"Out of memory. Try to lower your batch size.\\n"'),
               Source('mem_cache/allocation.py', 345, '"alloc_req_slots runs out of memory. "'),
               Source('mem_cache/kv_cache_configurator.py', 3394,
                      'f"Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "'),
               Source('mem_cache/kv_cache_configurator.py', 3154,
                      'f"Hybrid (mamba/linear-attention) state cache is too small to serve "'),
               Source('mem_cache/mamba_checkpoint_pool.py', 359,
                      'f"{free_bytes / GB:.2f}GB HBM is free. Lower --int8-mamba-ckpt-size "'),
               Source('mem_cache/unified_memory_pool.py', 1564,
                      'f"[unified-memory-pool] {factory}: byte budget {total_bytes} cannot fit "'),
               Source('model_executor/pool_configurator.py', 1027, '{fixed_swa_bytes / (1 << 30):.2f} GiB) leaves no room for the full '),
               Source('model_executor/pool_configurator.py', 1681, '{swa_fixed_bytes / (1 << 30):.2f} GB) leaves no room for the full '))),
    Signature('cuda_oom',
              re.compile(r'CUDA out of memory|OutOfMemoryError|CUDA error: out of memory'),
              'The GPUs ran out of memory: lower --mem-fraction-static (leaves room for activations and CUDA graphs) or '
              'lower the CUDA graph batch size (--cuda-graph-max-bs-decode).',
              False,
              (Source('torch (c10/cuda/CUDACachingAllocator.cpp)', None,
                      'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s'),
               Source('CUDA runtime (cudaErrorMemoryAllocation, via torch: e.g. inside a graph capture)', None,
                      'RuntimeError: CUDA error: out of memory'))),
    # Not GPU memory: a Triton kernel's configuration needs more shared memory (or registers) than the GPU has.
    Signature('triton_out_of_resources',
              re.compile(r'OutOfResources: out of resource: |out of resource: (?:shared memory|registers|tensor memory)'),
              'A Triton kernel needs more on-chip resources (shared memory, registers) than this GPU has: a kernel '
              'configuration tuned for another GPU. Use the SGLang/sgl-kernel build for this GPU, or another backend '
              '(--attention-backend, --moe-runner-backend); lowering memory flags does not help.',
              False,
              (Source('triton (runtime/errors.py OutOfResources, raised from compiler/compiler.py _init_handles)', None,
                      'triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: %d, Hardware '
                      'limit: %d. Reducing block sizes or `num_stages` may help.'),)),
    Signature('cuda_graph_failed',
              re.compile(r'(?i)Capture [\w -]*?cuda graph failed'),
              'CUDA graph capture failed (usually memory): lower --mem-fraction-static or the CUDA graph batch size '
              '(--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill), or run once with '
              '--cuda-graph-backend-decode=disabled to confirm.',
              False,
              (Source('model_executor/runner/decode_cuda_graph_runner.py', 603,
                      'f"Capture cuda graph failed: {e}\\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}"'),
               Source('model_executor/runner/prefill_cuda_graph_runner.py', 521, 'f"Capture prefill CUDA graph failed: {e}\\n"'),
               Source('speculative/eagle_draft_cuda_graph_runner.py', 297,
                      'f"Capture cuda graph failed: {e}\\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}"'),
               Source('speculative/eagle_draft_extend_cuda_graph_runner.py', 306,
                      'f"Capture cuda graph failed: {e}\\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}"'),
               Source('speculative/multi_layer_eagle_draft_extend_cuda_graph_runner.py', 227,
                      'f"Capture cuda graph failed: {e}\\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}"'),
               Source('speculative/frozen_kv_mtp_cuda_graph_runner.py', 198,
                      'f"Capture frozen-KV MTP cuda graph failed: {e}\\n"'))),
    # The HTTP port's listening paths in 0.5.23 (entrypoints/http_server.py): one server (uvicorn.Server, the default:
    # uvicorn/server.py:190 logs asyncio's or uvloop's create_server error), --tokenizer-worker-num > 1 (uvicorn.run
    # with workers: uvicorn/config.py:605 logs socket.bind's error) and SO_REUSEPORT workers (http_server.py:2738 logs
    # it with SGLang's prefix). Python says "Address", asyncio "address": the pattern takes both.
    # Before warmup_failed: with the HTTP port taken, uvicorn fails at once and the warmup thread, polling a port
    # that never served, logs "Initialization failed. warmup error" ~2 minutes later: the port is the cause.
    Signature('http_port_in_use',
              re.compile(r'\[Errno 98\].*(?i:address already in use)'),
              'The HTTP port is taken by another process: find it with `ss -ltnp` and stop it, or change --port.',
              False,
              (Source('uvicorn==0.54.0:uvicorn/server.py', 190, 'logger.error(exc)'),
               Source('asyncio (CPython 3.11) / uvloop create_server', None,
                      '[Errno 98] error while attempting to bind on address %r: address already in use'),
               Source('uvicorn==0.54.0:uvicorn/config.py', 605, 'logger.error(exc)'),
               Source('entrypoints/http_server.py', 2738, 'logger.error(error)'),
               Source('socket (CPython 3.11) bind, as uvicorn\'s bind_socket (workers > 1) and _ReusePortMultiprocess bind',
                      None, 'OSError: [Errno 98] Address already in use'))),
    Signature('warmup_failed',
              re.compile(r'Initialization failed\. warmup error'),
              'The server loaded but its first (warmup) request failed: read the warmup error; SGLANG_WARMUP_TIMEOUT bounds it.',
              False,
              (Source('entrypoints/http_server.py', 2384, 'logger.error(f"Initialization failed. warmup error: {last_traceback}")'),
               Source('entrypoints/http_server.py', 2533, 'logger.error(f"Initialization failed. warmup error: {last_traceback}")'))),
    Signature('port_in_use',
              re.compile(r'Port is already in use|is not available in \d+ seconds|bootstrap_port \S+ is already in use\. |'
                         r'Could not bind port \S+ on any configured address family|ZMQError: Address already in use|'
                         r'EADDRINUSE'),
              'Another process holds a port in SGLang\'s range (internal ports are derived from --port): stop the other '
              'server or choose another --port.',
              False,
              (Source('server_args.py', 886, 'f"Port is already in use. {dist_init_port=} {port_base=} {detokenizer_port=} '
                      '{nccl_port=} {scheduler_input_port=}"'),
               Source('utils/network.py', 103, 'f"{port_name} at {port} is not available in {timeout_s} seconds. {error_message}"'),
               Source('entrypoints/engine.py', 1196, 'f"engine_info_bootstrap_port {bootstrap_port} is already in use. "'),
               Source('utils/network.py', 178, 'raise OSError(f"Could not bind port {port} on any configured address family")'),
               Source('pyzmq (zmq.error.ZMQError, EADDRINUSE from libzmq bind)', None,
                      "zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.1:30005')"),
               Source('torch (c10d TCPStore, socket.cpp)', None,
                      'The server socket has failed to listen on any local network address. port: %d, useIPv6: 0, code: '
                      '-98, name: EADDRINUSE, message: address already in use'))),
    Signature('nccl',
              re.compile(r'NCCL WARN|NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ncclRemoteError|'
                         r'Watchdog caught collective operation timeout|Failed to load NCCL library from'),
              'NCCL failed: check the NCCL_* environment (on PCIe-only boxes NCCL_P2P_LEVEL / --enable-p2p-check / '
              'NCCL_P2P_DISABLE=1), NCCL_SOCKET_IFNAME and NCCL_IB_DISABLE; if its library failed to load, the '
              'venv\'s nvidia-nccl package (or SGLANG_NCCL_SO_PATH).',
              False,
              (Source('distributed/device_communicators/pynccl_wrapper.py', 474, 'raise RuntimeError(f"NCCL error: {error_str}")'),
               Source('distributed/device_communicators/pynccl_wrapper.py', 441, '"Failed to load NCCL library from %s . "'),
               Source('NCCL (debug.cc, NCCL_DEBUG=WARN)', None, '%s:%d:%d [%d] NCCL WARN %s'),
               Source('torch (ProcessGroupNCCL.cpp)', None,
                      '[Rank %d] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=%d, OpType=ALLREDUCE, ...)'),
               Source('torch (distributed, NCCL result)', None,
                      'torch.distributed.DistBackendError: NCCL error in: %s, unhandled system error (run with '
                      'NCCL_DEBUG=INFO for details), NCCL version %s\nncclSystemError: System call (e.g. socket, malloc) '
                      'or external library call failed or device error.'))),
    # Every watchdog of 0.5.23 (one per manager: debug_name Scheduler, TokenizerManager, DetokenizerManager,
    # DataParallelController) and the HTTP health check: a process stopped making progress. Only the hard ones: a
    # soft watchdog (--soft-watchdog-timeout; the tokenizer and detokenizer managers' are always soft) logs the same
    # line with self.soft=True and lets the process live on (utils/watchdog.py:161-164), a warning, not a cause.
    # After a hard one the watchdog sleeps 5 s and SIGQUITs its parent, which kills the tree (:163-164).
    Signature('watchdog_timeout',
              re.compile(r'(?P<who>\w+) watchdog timeout \((?![^)]*self\.soft=True)|'
                         r'Health check failed\. Server couldn\'t get a response'),
              'A SGLang process ({who}) stopped making progress for --watchdog-timeout seconds: a hung NCCL collective, '
              'a stuck GPU kernel or a dead peer rank. The debug info above names the stuck batch; its py-spy dump '
              'needs py-spy on the unit\'s PATH (the venv\'s bin is not on systemd\'s default PATH: "py-spy: not '
              'found" above), else run the venv\'s `py-spy dump` on the hung process yourself; check the GPUs '
              '(nvidia-smi, `dmesg | grep -i xid`) and NCCL; raise --watchdog-timeout only for steps known to be long.',
              False,
              (Source('utils/watchdog.py', 154, 'f"{self.debug_name} watchdog timeout "'),
               Source('entrypoints/http_server.py', 793,
                      'f"Health check failed. Server couldn\'t get a response from detokenizer for last "'))),
    # models/registry.py:117-133 imports every model module and only warns when one fails to import, dropping that
    # architecture: the start then refuses it (registry.py:64 "are not supported for now") or falls back to the
    # Transformers implementation through the checkpoint's auto_map. The warning names the real cause, the error that
    # follows does not. Only K2.6's own modules (kimi_k25 imports deepseek_v2 and kimi_vl_moonvit; kimi_k25_eagle3 is
    # its EAGLE3 draft): other models' optional dependencies warn at every start, which is no failure. The last
    # specific row, since SGLang carries on past it: any other specific cause of the same run names it first.
    Signature('model_class_import_failed',
              re.compile(r'Ignore import error when loading sglang\.srt\.models\.'
                         r'(?P<module>kimi_k25_eagle3|kimi_k25|kimi_vl_moonvit|deepseek_v2): (?P<error>.*)'),
              'SGLang could not import its own implementation of the served model (sglang.srt.models.{module}: {error}), '
              'so the start refused the architecture or fell back to the much slower Transformers implementation: '
              'install what is missing into the server\'s venv (the SGLang extra, or the kernel build for this GPU).',
              False,
              (Source('models/registry.py', 132, 'logger.warning(f"Ignore import error when loading {name}: {e}")'),)),
    # Generic markers: they say that something failed, the cause is elsewhere.
    # A rank that loaded waits for the others at the post-load barrier and gives up (0.5.23 model_runner.py:1405-1410,
    # load_model_utils.py:386-395, after UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480 s, :56): raised inside a scheduler,
    # so its line always comes with that scheduler's `Scheduler hit an exception`. First of the generic rows: it says
    # where the cause is (a rank that did not load; on a multi-node start, another node: its journal), where the
    # exception line only says "the traceback", which here is this rank's wait, not the cause.
    Signature('other_rank_failed',
              re.compile(r'could finish the model loading, but there are other ranks that didn\'t finish loading'),
              'Another TP rank did not finish loading the model (out of memory, a missing shard, a hung or slow node): '
              'on a multi-node start, read the journal of the other node(s) (the same unit there) for the cause; on '
              'one node, the failing rank\'s own traceback above.',
              True,
              (Source('model_executor/model_runner_components/load_model_utils.py', 394,
                      'f"TP rank {tp_rank} could finish the model loading, but there are other ranks that didn\'t finish'),)),
    Signature('scheduler_died',
              re.compile(r'scheduler died during initialization|scheduler is dead'),
              'A scheduler (one TP rank) died: its traceback above is the cause.',
              True,
              (Source('entrypoints/engine.py', 2006, 'f"Rank {rank} scheduler died during initialization "'),)),
    # Every subprocess manager's event loop logs it before SIGQUIT to the parent: one row for the family. Before
    # subprocess_crashed: the teardown that follows an exception SIGKILLs the schedulers, and the watchdog may log one
    # of them as crashed (-9) before the main process ends; the exception is the cause.
    Signature('subprocess_exception',
              re.compile(r'\b(?P<who>[A-Z]\w*) hit an exception'),
              'A SGLang process ({who}; Scheduler is one TP rank) raised: the traceback that follows this line is the cause.',
              True,
              (Source('managers/scheduler.py', 6372, 'logger.error(f"Scheduler hit an exception: {traceback}")'),
               Source('managers/tokenizer_manager.py', 4043, 'logger.error(f"TokenizerManager hit an exception: {traceback}")'),
               Source('managers/detokenizer_manager.py', 566,
                      'logger.error(f"DetokenizerManager hit an exception: {traceback}")'),
               Source('managers/data_parallel_controller.py', 1011,
                      'logger.error(f"DataParallelController hit an exception: {traceback}")'),
               Source('managers/multi_tokenizer_mixin.py', 833,
                      'logger.error(f"MultiDetokenizerRouter hit an exception: {traceback}")'),
               Source('managers/multi_tokenizer_mixin.py', 945,
                      'logger.error(f"MultiTokenizerRouter hit an exception: {traceback}")'))),
    # After the load, the watchdog notices a dead scheduler (no traceback when the kernel killed it).
    Signature('subprocess_crashed',
              re.compile(r'(?P<name>(?<=Subprocess )\S+(?= \(pid=\d+\) crashed)|Scheduler or DataParallelController'
                         r'(?= \d+ terminated))[^\n]*?(?:crashed with exit code|terminated with) (?P<code>-?\d+)'),
              'The server\'s {name} process died with exit code {code} after start-up (-9 is SIGKILL, usually the kernel '
              'OOM killer: check `journalctl -k | grep -i oom`); a traceback above it, if any, is the cause.',
              True,
              (Source('utils/watchdog.py', 217, 'f"Subprocess {name} (pid={proc.pid}) crashed "'),
               Source('entrypoints/engine.py', 1024, 'f"Scheduler or DataParallelController {proc.pid} "'),
               Source('managers/data_parallel_controller.py', 1007,
                      'f"Scheduler or DataParallelController {proc.pid} terminated with {proc.exitcode}"'))),
    # SIGQUIT: a child asks the main process to tear everything down (during the load: engine.py; after it: the
    # tokenizer manager's handler). As a verdict a fallback: every SIGQUIT sender of 0.5.23 logs its own line first,
    # read by a row above (managers/scheduler.py:6372-6373, detokenizer_manager.py:566-569,
    # data_parallel_controller.py:1011-1012, multi_tokenizer_mixin.py:833-836, utils/watchdog.py:154-163 and :216-221;
    # utils/common.py:2554-2558 signals a process it has just SIGKILLed). Its pattern is SIGQUIT_RE: the traceback
    # the waiter shows is the last one before this line (tests/integration/test_failure_families.py asserts both).
    Signature('child_failed',
              re.compile(r'Received sigquit from a child process|SIGQUIT received\. .*It usually means one child failed'),
              'SGLang stopped because a child process failed: the real cause is the traceback before this line.',
              True,
              (Source('entrypoints/engine.py', 1978,
                      '"Received sigquit from a child process. It usually means the child failed."'),
               Source('managers/tokenizer_manager.py', 4074,
                      'f"SIGQUIT received. {signum=}, {frame=}. It usually means one child failed."'))),
)

_SIGNATURE_INDEX = dict((s.name, i) for i, s in enumerate(FATAL_SIGNATURES))

# Lines known to be harmless even though they contain alarming words; they never
# count as fatal and never appear in the failure excerpt.
BENIGN_PATTERNS = (
    re.compile(r'Setup Custom allreduce failed with CUDART error: peer access is not supported'),
    re.compile(r"(?i)custom all-?reduce.*disabled because it's not supported on more than two PCIe-only GPUs"),
    re.compile(r'Unexpected error during package walk: cutlass\.cute\.experimental'),
)

# SGLang's logging prefix: "[2026-05-30 14:39:28 TP1] ", "[2026-05-30 14:39:28 DP0 TP3 EP3] ",
# "[2026-05-30 14:39:28] " (main process). Lines without it are continuation lines
# (tracebacks, compiler output, uvicorn, tqdm).
LOG_PREFIX_RE = re.compile(r'^\[(?P<time>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)(?: (?P<rank>[^\]]*))?\] ?')
# Other loggers writing whole lines of their own (uvicorn, python warnings, NCCL "host:pid:tid [n] NCCL ...").
OTHER_LOGGER_RE = re.compile(r'^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s|^\S+:\d+:\d+ \[\d+\] NCCL ')

# The line that means "a child failed, the cause is above".
SIGQUIT_RE = FATAL_SIGNATURES[_SIGNATURE_INDEX['child_failed']].pattern

# Secrets that SGLang itself prints (server_args=ServerArgs(... api_key='...')).
_SECRET_RES = (
    re.compile(r"(?P<key>\b(?:admin_)?api_key\s*=\s*)(?P<q>['\"])(?P<value>[^'\"]+)(?P=q)"),
    re.compile(r"(?P<key>--(?:admin-)?api-key[ =])(?P<q>['\"]?)(?P<value>[^\s'\"]+)(?P=q)"),
    re.compile(r"(?P<key>\b(?:hf_token|HF_TOKEN|token)\s*=\s*)(?P<q>['\"])(?P<value>[^'\"]+)(?P=q)"),
    re.compile(r"(?P<key>Authorization:\s*Bearer\s+)(?P<q>)(?P<value>\S+)"),
)
REDACTED = secret_flags.REDACTED
# HTTP headers whose values are secrets (a probe's Authorization, X-API-Key, cookies...): masked like the above.
SECRET_HEADER_RE = re.compile(r'(?i)authorization|api[-_]?key|token|secret|cookie')
# SGLang flags whose value is a secret (argv words), read from the one list held to the release's parser
# (secret_flags.SECRET_FLAGS, tests/conformance/test_secret_flags.py).
SECRET_FLAGS = secret_flags.SECRET_ARGV_FLAGS


def phase_index(name):
    """Position of a phase in PHASES (-1 for None/unknown)."""
    return _PHASE_INDEX.get(name, -1)


def phase_by_name(name):
    """The Phase row for a name, or None."""
    idx = _PHASE_INDEX.get(name)
    return None if idx is None else PHASES[idx]


def phase_label(name):
    phase = phase_by_name(name)
    return phase.label if phase else 'before the first start-up phase'


def match_phase(line):
    """The latest Phase whose pattern matches the line, or None."""
    for phase in reversed(PHASES):
        if phase.pattern.search(line):
            return phase
    return None


def is_benign(line):
    return any(p.search(line) for p in BENIGN_PATTERNS)


def match_fatal(line):
    """(Signature, match) for the highest-priority fatal signature in the line, or (None, None).

    Known-harmless warnings never match.
    """
    if is_benign(line):
        return None, None
    for sig in FATAL_SIGNATURES:
        m = sig.pattern.search(line)
        if m:
            return sig, m
    return None, None


def signature_priority(name):
    return _SIGNATURE_INDEX.get(name, len(FATAL_SIGNATURES))


def signature_hint(sig, match=None):
    """The hint of a signature, filled with the pattern's named groups when it uses them."""
    if match is not None and match.groupdict():
        try:
            return sig.hint.format(**dict((k, (v or '').strip()) for k, v in match.groupdict().items()))
        except (KeyError, IndexError, ValueError):
            pass
    return sig.hint.replace('{', '').replace('}', '')


def strip_prefix(line):
    """Split SGLang's log prefix off: returns (rank or '', text). rank is '' for the main process."""
    m = LOG_PREFIX_RE.match(line)
    if not m:
        return None, line
    return (m.group('rank') or ''), line[m.end():]


def has_log_prefix(line):
    """True when the line starts a log record of its own (SGLang's or another logger's)."""
    return bool(LOG_PREFIX_RE.match(line) or OTHER_LOGGER_RE.match(line))


def secret_values(api_key=None, headers=None):
    """The values to mask in anything shown: the API key and every header value whose name looks secret."""
    return [api_key] + [str(v) for k, v in (headers or {}).items() if SECRET_HEADER_RE.search(str(k))]


def redact(line, secrets=()):
    """Mask api keys and tokens in a line (given secret values and the patterns SGLang prints)."""
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in line:
            line = line.replace(secret, REDACTED)
    for rx in _SECRET_RES:
        line = rx.sub(lambda m: m.group('key') + m.group('q') + REDACTED + m.group('q'), line)
    return line
