"""make_model output and the model/venv checks (pure logic on real files)."""
import json
import os
import struct

# standin_helpers puts the stand-in's sources on sys.path.
import standin_helpers  # noqa: F401  pylint: disable=unused-import
from sglang_standin import make_model, model_dir


def test_kimi_model_files(tmp_path):
    path = make_model.make_model(str(tmp_path / "kimi"), "kimi_k2", "nvfp4-pack-quantized", shards=3, shard_bytes=64)
    info, exists = model_dir.read_model(path)
    assert exists and info.is_mla and info.architecture == "KimiK25ForConditionalGeneration"
    assert info.quant_config["format"] == "nvfp4-pack-quantized"
    assert info.shard_files() == ["model-0000%d-of-00003.safetensors" % n for n in (1, 2, 3)]
    for name in info.shard_files():
        assert model_dir.check_shard(os.path.join(path, name)) is None
    assert os.path.exists(os.path.join(path, "tokenizer_config.json"))


def test_shard_is_safetensors(tmp_path):
    path = str(tmp_path / "shard.safetensors")
    make_model.write_shard(path, "w", 100)
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(length))
        data = handle.read()
    assert length % 8 == 0
    start, end = header["w"]["data_offsets"]
    assert end - start == len(data) == 100


def test_corrupt_shard_detected(tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(b"\xff" * 16)
    assert model_dir.check_shard(str(path)) == "header too large"


def test_missing_config(tmp_path):
    assert model_dir.read_model(str(tmp_path)) == (None, True)
    assert model_dir.read_model(str(tmp_path / "nope")) == (None, False)


def test_version_parsing():
    assert model_dir._version_tuple("0.15.0.1") == ((0, 15, 0, 1), False)
    assert model_dir._version_tuple("0.10.0rc1") == ((0, 10, 0), True)
    assert model_dir._version_tuple("0.10.0.post1") == ((0, 10, 0), False)


def test_llama_is_not_mla_nor_quantized(tmp_path):
    path = make_model.make_model(str(tmp_path / "llama"), "llama", "none", shards=1)
    info = model_dir.read_model(path)[0]
    assert not info.is_mla
    assert model_dir.compressed_tensors_problem(info) is None
