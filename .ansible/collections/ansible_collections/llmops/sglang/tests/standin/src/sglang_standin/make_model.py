"""Write a fake model directory the stand-in (and SGLang's file checks) accept.

    python -m sglang_standin.make_model DIR [--arch kimi_k2|llama] [--quant nvfp4-pack-quantized|pack-quantized|none]
                                           [--shards N] [--shard-bytes B] [--declared-bytes B]
Defaults: kimi_k2 with nvfp4-pack-quantized and 64 shards; llama unquantized with 4 shards; 4096-byte shards.

config.json looks like the real checkpoint's (Kimi K2.6: KimiK25ForConditionalGeneration around a DeepSeek-V3 text
config with MLA `kv_lora_rank` and a compressed-tensors `quantization_config`), plus tokenizer_config.json,
model.safetensors.index.json naming every shard, and small but valid safetensors shards. The index's
metadata.total_size declares the real model's size (the stand-in sizes GPU memory from it).
"""
import argparse
import json
import os
import struct

KIMI_TEXT_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "hidden_size": 7168,
    "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 64,
    "num_key_value_heads": 64, "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "max_position_embeddings": 262144, "rope_theta": 50000.0, "vocab_size": 163840, "torch_dtype": "bfloat16",
}
LLAMA_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "max_position_embeddings": 131072, "rope_theta": 500000.0, "vocab_size": 128256, "torch_dtype": "bfloat16",
}
DECLARED = {"kimi_k2": 594 * 10 ** 9, "llama": 16 * 10 ** 9}


def quantization_config(fmt):
    """A compressed-tensors config with int4/nvfp4 packed MoE experts, as in the Kimi K2.x checkpoints."""
    return {
        "quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "format": fmt, "targets": ["Linear"],
            "weights": {"num_bits": 4, "type": "float" if "fp4" in fmt else "int", "symmetric": True,
                        "strategy": "group", "group_size": 16 if "fp4" in fmt else 32, "dynamic": False},
            "input_activations": None, "output_activations": None}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"],
        "kv_cache_scheme": None,
    }


def model_config(arch, quant):
    if arch == "kimi_k2":
        config = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
                  "auto_map": {"AutoConfig": "configuration_kimi_k25.KimiK25Config",
                               "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration"},
                  "text_config": dict(KIMI_TEXT_CONFIG), "torch_dtype": "bfloat16"}
    else:
        config = dict(LLAMA_CONFIG)
    if quant != "none":
        config["quantization_config"] = quantization_config(quant)
    return config


def write_shard(path, tensor_name, nbytes):
    """A valid safetensors file: 8-byte little-endian header length, JSON header, raw tensor bytes."""
    elements = max(1, nbytes // 2)
    header = {"__metadata__": {"format": "pt"},
              tensor_name: {"dtype": "BF16", "shape": [elements], "data_offsets": [0, elements * 2]}}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # safetensors pads the header to 8 bytes
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)))
        handle.write(raw)
        handle.write(b"\0" * (elements * 2))


def make_model(directory, arch="kimi_k2", quant="nvfp4-pack-quantized", shards=5, shard_bytes=4096, declared_bytes=None):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as handle:
        json.dump(model_config(arch, quant), handle, indent=2)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as handle:
        json.dump({"tokenizer_class": "TikTokenTokenizer" if arch == "kimi_k2" else "PreTrainedTokenizerFast",
                   "model_max_length": 262144 if arch == "kimi_k2" else 131072,
                   "bos_token": "[BOS]" if arch == "kimi_k2" else "<|begin_of_text|>",
                   "eos_token": "[EOS]" if arch == "kimi_k2" else "<|eot_id|>"}, handle, indent=2)
    weight_map = {}
    for number in range(1, shards + 1):
        name = "model-%05d-of-%05d.safetensors" % (number, shards)
        tensor = "model.layers.%d.mlp.weight" % (number - 1)
        write_shard(os.path.join(directory, name), tensor, shard_bytes)
        weight_map[tensor] = name
    index = {"metadata": {"total_size": declared_bytes or DECLARED[arch]}, "weight_map": weight_map}
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as handle:
        json.dump(index, handle, indent=2)
    return directory


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m sglang_standin.make_model", description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("directory")
    parser.add_argument("--arch", choices=["kimi_k2", "llama"], default="kimi_k2")
    parser.add_argument("--quant", choices=["nvfp4-pack-quantized", "pack-quantized", "none"], default=None,
                        help="default: nvfp4-pack-quantized for kimi_k2, none for llama")
    parser.add_argument("--shards", type=int, default=None,
                        help="default: 64 for kimi_k2 (as the real checkpoint: one progress line per shard), 4 for llama")
    parser.add_argument("--shard-bytes", type=int, default=4096)
    parser.add_argument("--declared-bytes", type=int, default=None,
                        help="checkpoint size to declare in the index (default: the real model's)")
    args = parser.parse_args(argv)
    quant = args.quant or ("nvfp4-pack-quantized" if args.arch == "kimi_k2" else "none")
    shards = args.shards or (64 if args.arch == "kimi_k2" else 4)
    make_model(args.directory, args.arch, quant, shards, args.shard_bytes, args.declared_bytes)
    print(args.directory)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
