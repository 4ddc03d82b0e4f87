"""The model directory and the venv, checked for real (files on disk, installed package metadata)."""
import json
import os
import struct
import sysconfig

try:
    from importlib import metadata as importlib_metadata
except ImportError:  # pragma: no cover - Python < 3.8
    importlib_metadata = None

INDEX_FILE = "model.safetensors.index.json"
# compressed-tensors release that added each packed format (sglang.md "Versions").
FORMAT_INTRODUCED = {"nvfp4-pack-quantized": (0, 10, 0), "pack-quantized": (0, 4, 0), "mxfp4-pack-quantized": (0, 13, 0)}


class ModelInfo(object):
    def __init__(self, path, config, index):
        self.path = path
        self.config = config
        self.index = index

    @property
    def architecture(self):
        archs = self.config.get("architectures") or ["LlamaForCausalLM"]
        return archs[0]

    @property
    def text_config(self):
        return self.config.get("text_config") or self.config

    @property
    def is_mla(self):
        """DeepSeek/Kimi-style Multi-head Latent Attention: the config has kv_lora_rank."""
        return "kv_lora_rank" in self.text_config

    @property
    def context_length(self):
        return int(self.text_config.get("max_position_embeddings", 4096))

    @property
    def quant_config(self):
        return self.config.get("quantization_config") or self.text_config.get("quantization_config") or {}

    @property
    def declared_bytes(self):
        """The checkpoint size the index declares (a fake model declares the real model's size)."""
        meta = (self.index or {}).get("metadata", {})
        return int(meta.get("total_size", 16 * 1024 ** 3))

    def shard_files(self):
        """Shard files in load order, from the index (or every *.safetensors without one)."""
        if self.index:
            return sorted(set(self.index.get("weight_map", {}).values()))
        return sorted(name for name in os.listdir(self.path) if name.endswith(".safetensors"))


def read_model(path):
    """(ModelInfo, None) or (None, exists) when transformers would fail to find the config."""
    config_file = os.path.join(path, "config.json")
    if not os.path.isfile(config_file):
        return None, os.path.isdir(path)
    with open(config_file) as handle:
        config = json.load(handle)
    index = None
    index_file = os.path.join(path, INDEX_FILE)
    if os.path.isfile(index_file):
        with open(index_file) as handle:
            index = json.load(handle)
    return ModelInfo(path, config, index), True


# What safetensors raises when it opens a shard: `SafetensorError: Error while deserializing header: TEXT`, with the
# texts of safetensors 0.6.2 and 0.8.0 (both wheels run on crafted files; the Rust source is
# safetensors/src/tensor.rs `SafeTensors::read_metadata`: length < 8 -> HeaderTooSmall, length > MAX_HEADER_SIZE
# (100_000_000) -> HeaderTooLarge, 8 + length > file -> InvalidHeaderLength, header not JSON ->
# InvalidHeaderDeserialization, and `buffer_end + 8 + n != buffer_len` -> MetadataIncompleteBuffer: a file shorter,
# or longer, than its header's largest data offset).
MAX_HEADER_SIZE = 100000000


def check_shard(path):
    """None if `path` opens as a safetensors file, else the text safetensors' error gives."""
    with open(path, "rb") as handle:
        head = handle.read(8)
        size = os.fstat(handle.fileno()).st_size
        if len(head) < 8:
            return "header too small"
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_SIZE:
            return "header too large"
        if 8 + length > size:
            return "invalid header length"
        header = handle.read(length)
    try:
        text = header.decode("utf-8")
    except UnicodeDecodeError as exc:
        return "invalid UTF-8 in header: %s" % exc
    try:
        meta = json.loads(text)
    except ValueError as exc:
        return "invalid JSON in header: %s" % exc
    end = 0
    for name, info in (meta.items() if isinstance(meta, dict) else ()):
        if name == "__metadata__":
            continue
        try:
            end = max(end, int(info["data_offsets"][1]))
        except (TypeError, KeyError, ValueError, IndexError):
            return "invalid JSON in header: missing field `data_offsets`"
    if 8 + length + end != size:
        return "incomplete metadata, file not fully covered"
    return None


def _version_tuple(text):
    """(release tuple, is_prerelease) of a PEP 440 version, enough to compare with a final release."""
    release = []
    rest = text.split("+", 1)[0]
    for part in rest.split("."):
        digits = ""
        for char in part:
            if not char.isdigit():
                break
            digits += char
        if not digits:
            break
        release.append(int(digits))
        if digits != part:
            return tuple(release), not part[len(digits):].startswith("post")
    return tuple(release), False


def installed_version(dist):
    """The installed distribution's version from its real metadata, or None when absent."""
    for name in (dist, dist.replace("-", "_")):  # Python 3.9 does not normalise names itself
        try:
            return importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            continue
    return None


def compressed_tensors_problem(model):
    """The unsupported format name when the checkpoint needs a newer compressed-tensors than installed, else None."""
    quant = model.quant_config
    if quant.get("quant_method") != "compressed-tensors":
        return None
    formats = [quant.get("format")]
    for group in (quant.get("config_groups") or {}).values():
        formats.append(group.get("format"))
    needed = [fmt for fmt in formats if fmt in FORMAT_INTRODUCED]
    if not needed:
        return None
    version = installed_version("compressed-tensors")
    for fmt in needed:
        if version is None:
            return fmt  # absent counts as too old: nothing can parse the format
        release, pre = _version_tuple(version)
        release = release + (0,) * (3 - len(release))
        if release < FORMAT_INTRODUCED[fmt] or (release[:3] == FORMAT_INTRODUCED[fmt] and pre):
            return fmt
    return None


def python_include_dir():
    return sysconfig.get_paths()["include"]


def python_headers_missing():
    """True when Triton's JIT could not compile against this interpreter (no Python.h in its include dir)."""
    return not os.path.exists(os.path.join(python_include_dir(), "Python.h"))
