"""The nvidia-smi stand-in: the real output formats, and memory that follows the stand-in's load."""
import os
import re
import subprocess

from standin_helpers import WAIT

# Copies of real nvidia-smi tables (driver 580, 2x H200) from the project's shared fixtures.
DATA = os.path.join(os.path.dirname(__file__), "data")


def smi(python, *args, **env):
    environ = dict(os.environ, SGLANG_STANDIN_GPU_COUNT="2", **env)
    result = subprocess.run([python, "-m", "sglang_standin.nvidia_smi"] + list(args), check=False, stdout=subprocess.PIPE,
                            universal_newlines=True, env=environ, timeout=WAIT)
    return result.returncode, result.stdout


def masked(text):
    """Drop what varies between two idle H200 boxes: the date, temperature and power draw."""
    text = re.sub(r"^\w{3} \w{3} +\d+ [\d:]+ \d{4} *$", "DATE", text, flags=re.M)
    return re.sub(r"\| N/A +\d+C +P0 +\d+W / +\d+W \|", "| POWER |", text)


def test_idle_table_matches_real_layout(standin_python):
    code, out = smi(standin_python)
    assert code == 0
    with open(os.path.join(DATA, "nvidia-smi-h200-idle.txt")) as handle:
        real = handle.read()
    assert masked(out).strip().splitlines()[1:] == masked(real).strip().splitlines()[1:]


def test_query_formats(standin_python):
    assert smi(standin_python, "--query-gpu=index,name,memory.used,memory.total", "--format=csv")[1].splitlines() == [
        "index, name, memory.used [MiB], memory.total [MiB]", "0, NVIDIA H200, 0 MiB, 143771 MiB",
        "1, NVIDIA H200, 0 MiB, 143771 MiB"]
    line = smi(standin_python, "--query-gpu=index,name,uuid,pci.bus_id,memory.used,memory.total,utilization.gpu,compute_cap",
               "--format=csv,noheader,nounits")[1].splitlines()[0]
    assert re.match(r"0, NVIDIA H200, GPU-[0-9a-f-]{36}, 00000000:00:06\.0, 0, 143771, 0, 9\.0$", line)
    assert re.match(r"GPU 1: NVIDIA H200 \(UUID: GPU-[0-9a-f-]{36}\)$", smi(standin_python, "-L")[1].splitlines()[1])
    assert smi(standin_python, "--query-gpu=bogus", "--format=csv")[0] == 2


def test_memory_follows_the_load(launch, standin_python, model_dir, tmp_path):
    state = str(tmp_path / "state")
    os.makedirs(state)
    server = launch(standin_python, model_dir, "--tp", "2",
                    env={"SGLANG_STANDIN_STATE_DIR": state, "SGLANG_STANDIN_FAULT": "hang@cuda_graph"})
    server.wait_for(r"TP0\] Capture target decode CUDA graph begin")
    server.wait_for(r"TP1\] Capture target decode CUDA graph begin")
    query = ("--query-gpu=index,memory.used", "--format=csv,noheader,nounits")
    used = [int(line.split(", ")[1]) for line in smi(standin_python, *query, SGLANG_STANDIN_STATE_DIR=state)[1].splitlines()]
    assert used[0] > 100000 and used[1] > 100000  # weights + KV cache of a 16 GB model at TP 2 on 140 GB GPUs
    apps = smi(standin_python, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits",
               SGLANG_STANDIN_STATE_DIR=state)[1].splitlines()
    assert len(apps) == 2
    server.kill()
    idle = smi(standin_python, *query, SGLANG_STANDIN_STATE_DIR=state)[1].splitlines()
    assert idle == ["0, 0", "1, 0"]


def test_busy_table_matches_real_layout(standin_python, tmp_path):
    """GPU 0 used by a live process (this test's own pid stands in for a scheduler)."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "gpu0.json").write_text('{"pid": %d, "used_mib": 19601}' % os.getpid())
    out = smi(standin_python, SGLANG_STANDIN_STATE_DIR=str(state))[1]
    with open(os.path.join(DATA, "nvidia-smi-h200-busy.txt")) as handle:
        real = handle.read().replace("      4MiB / 143771MiB", "      0MiB / 143771MiB")  # driver noise on an idle GPU

    def normal(text):
        return masked(text).replace("%14d" % os.getpid(), "%14d" % 610)

    assert normal(out).strip().splitlines()[1:] == normal(real).strip().splitlines()[1:]
