"""The stand-in's safetensors framing check and its nvidia-smi health faults, against real formats.

The safetensors texts are what safetensors 0.6.2 and 0.8.0 raise for the same crafted files (their Rust
`read_metadata`, safetensors/src/tensor.rs); the nvidia-smi formats are a real H200's (fixtures h200-full).
"""
import json
import os
import signal
import struct
import subprocess

import pytest

from standin_helpers import WAIT
from sglang_standin import model_dir

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "unit", "plugins", "module_utils", "fixtures", "nvidia-smi", "h200-full")


def shard(path, tensors=(("a", 16), ("b", 8)), cut=0, extra=b""):
    header, offset = {}, 0
    for name, nbytes in tensors:
        header[name] = {"dtype": "F32", "shape": [nbytes // 4], "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    data = struct.pack("<Q", len(raw)) + raw + b"\0" * offset + extra
    path.write_bytes(data[:len(data) - cut] if cut else data)
    return str(path)


@pytest.mark.parametrize("cut,extra,expected", [
    (0, b"", None),
    (5, b"", "incomplete metadata, file not fully covered"),      # truncated inside the tensor data
    (0, b"x", "incomplete metadata, file not fully covered"),     # longer than declared
])
def test_framing_like_real_safetensors(tmp_path, cut, extra, expected):
    assert model_dir.check_shard(shard(tmp_path / "s.safetensors", cut=cut, extra=extra)) == expected


def test_header_cut_and_tiny_files(tmp_path):
    whole = shard(tmp_path / "whole.safetensors")
    with open(whole, "rb") as handle:
        data = handle.read()
    (tmp_path / "h.safetensors").write_bytes(data[:20])
    (tmp_path / "t.safetensors").write_bytes(data[:4])
    assert model_dir.check_shard(str(tmp_path / "h.safetensors")) == "invalid header length"
    assert model_dir.check_shard(str(tmp_path / "t.safetensors")) == "header too small"


def test_loader_refuses_a_shard_100_bytes_short(launch, standin_python, model_dir):
    """Issue 16's experiment: 100 bytes cut from a shard's end; the stand-in used to load it as whole."""
    victim = os.path.join(model_dir, "model-00002-of-00004.safetensors")
    with open(victim, "r+b") as handle:
        handle.truncate(os.path.getsize(victim) - 100)
    server = launch(standin_python, model_dir)
    assert server.wait_exit() == -signal.SIGKILL
    assert ("safetensors_rust.SafetensorError: Error while deserializing header: incomplete metadata, file not "
            "fully covered") in server.output
    assert "Load weight end" not in server.output


def smi(python, *args, **env):
    environ = dict(os.environ, SGLANG_STANDIN_GPU_COUNT="2", SGLANG_STANDIN_SMI_FAULT_FILE="/nonexistent")
    environ.update(env)
    result = subprocess.run([python, "-m", "sglang_standin.nvidia_smi"] + list(args), check=False, stdout=subprocess.PIPE,
                            universal_newlines=True, env=environ, timeout=WAIT)
    return result.returncode, result.stdout


def fixture_sections(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


HEALTH_QUERY = ("index,name,uuid,pci.bus_id,driver_version,vbios_version,persistence_mode,compute_mode,pstate,"
                "temperature.gpu,power.draw,power.limit,memory.used,memory.total,memory.reserved,ecc.mode.current,"
                "ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.volatile.total,"
                "ecc.errors.uncorrected.aggregate.total,retired_pages.pending,remapped_rows.pending,remapped_rows.failure,"
                "clocks_event_reasons.active,clocks_event_reasons.active,compute_cap,mig.mode.current,fabric.state,"
                "fabric.status")


def test_health_query_has_the_real_header_and_shape(standin_python):
    """The fixture's query, field for field: same header line, same value formats on an idle H200."""
    code, out = smi(standin_python, "--query-gpu=" + HEALTH_QUERY, "--format=csv")
    assert code == 0
    real = fixture_sections("query-gpu-header.csv").splitlines()
    lines = out.splitlines()
    assert lines[0] == real[0]
    mine, theirs = [v.strip() for v in lines[1].split(",")], [v.strip() for v in real[1].split(",")]
    fields = HEALTH_QUERY.split(",")
    # identity and what varies (uuid, temperature, power draw) aside, an idle healthy H200 reads the same
    for i in (0, 1, 4, 6, 7, 8, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 24, 25, 26, 27):
        assert mine[i] == theirs[i], (fields[i], mine[i], theirs[i])


def test_version_matches_the_real_head_of_q(standin_python):
    code, out = smi(standin_python, "--version")
    assert code == 0
    assert out.splitlines() == fixture_sections("q.txt").splitlines()[:4]


@pytest.mark.parametrize("fault,field,value", [
    ("ecc@1=2", "ecc.errors.uncorrected.volatile.total", "2"),
    ("remap_pending@1", "remapped_rows.pending", "Yes"),
    ("remap_failure@1", "remapped_rows.failure", "Yes"),
    ("retired_pending@1", "retired_pages.pending", "Yes"),
    ("persistence_off@1", "persistence_mode", "Disabled"),
])
def test_each_fault_shows_on_its_gpu_only(standin_python, tmp_path, fault, field, value):
    faults = tmp_path / "faults"
    faults.write_text("# injected by a test\n%s\n" % fault)
    code, out = smi(standin_python, "--query-gpu=index," + field, "--format=csv,noheader,nounits",
                    SGLANG_STANDIN_SMI_FAULT_FILE=str(faults))
    assert code == 0
    rows = dict(line.split(", ") for line in out.splitlines())
    assert rows["1"] == value and rows["0"] != value


def test_foreign_process_count_and_cuda_faults(standin_python):
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        code, out = smi(standin_python, "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
                        "--format=csv,noheader,nounits", SGLANG_STANDIN_SMI_FAULT="process@1=%d:1234" % sleeper.pid)
        assert code == 0
        pid, name, mib, uuid = out.strip().split(", ")
        assert (int(pid), name, mib) == (sleeper.pid, "sleep", "1234") and uuid.startswith("GPU-")
        code, table = smi(standin_python, SGLANG_STANDIN_SMI_FAULT="process@1=%d:1234" % sleeper.pid)
        assert "%d      C   sleep" % sleeper.pid in table
    finally:
        sleeper.kill()
        sleeper.wait()
    code, out = smi(standin_python, "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
                    "--format=csv,noheader,nounits", SGLANG_STANDIN_SMI_FAULT="process@1=%d:1234" % sleeper.pid)
    assert out.strip() == ""  # a process that ended holds nothing
    code, out = smi(standin_python, "-L", SGLANG_STANDIN_SMI_FAULT="gpus=1")
    assert len(out.splitlines()) == 1
    code, out = smi(standin_python, "--version", SGLANG_STANDIN_SMI_FAULT="cuda=12.2 driver=535.104.05")
    assert "CUDA Version        : 12.2" in out and "DRIVER version      : 535.104.05" in out


def test_remapped_rows_and_retired_pages_queries(standin_python):
    real = fixture_sections("topo-etc.txt").split("---\n")
    code, out = smi(standin_python, "--query-remapped-rows=gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,"
                    "remapped_rows.pending,remapped_rows.failure", "--format=csv", SGLANG_STANDIN_SMI_FAULT="gpus=1")
    remap = [s for s in real if s.startswith("gpu_uuid, remapped_rows")][0].splitlines()
    assert out.splitlines()[0] == remap[0]
    assert out.splitlines()[1].split(", ")[1:] == remap[1].split(", ")[1:]
    code, out = smi(standin_python, "--query-retired-pages=gpu_uuid,retired_pages.address,retired_pages.cause",
                    "--format=csv", SGLANG_STANDIN_SMI_FAULT="gpus=1")
    retired = [s for s in real if s.startswith("gpu_uuid, retired_pages")][0].splitlines()
    assert [l.split(", ")[1:] for l in out.splitlines()] == [l.split(", ")[1:] for l in retired]


def test_a_bad_fault_item_is_an_error_not_a_healthy_gpu(standin_python):
    code, out = smi(standin_python, "-L", SGLANG_STANDIN_SMI_FAULT="ecc@one")
    assert code == 2 and "bad fault item 'ecc@one'" in out
