"""Fixtures for the SGLang stand-in's tests: throwaway venvs with the stand-in installed, and a server runner.

Every server is a real subprocess in its own session on 127.0.0.1 and a free port; its process group is
SIGKILLed at teardown whatever happened. Venvs are session-scoped so the suite stays fast.
"""
import pathlib
import shutil
import sys
import tempfile

import pytest

from standin_helpers import Server, headerless_interpreter, make_venv, run


@pytest.fixture(scope="session")
def venv_root():
    """Session venvs (tens of MB each) live in a temp dir removed at the end of the session."""
    root = tempfile.mkdtemp(prefix="sglang-standin-venvs-")
    yield pathlib.Path(root)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def standin_python(venv_root):
    """A venv with only the stand-in (no compressed-tensors)."""
    return make_venv(str(venv_root / "plain"))


@pytest.fixture(scope="session")
def ct_old_python(venv_root):
    return make_venv(str(venv_root / "ct081"), extra=["compressed-tensors==0.8.1"])


@pytest.fixture(scope="session")
def ct_new_python(venv_root):
    return make_venv(str(venv_root / "ct018"), extra=["compressed-tensors==0.18.0"])


@pytest.fixture(scope="session")
def no_headers_python(venv_root):
    python = headerless_interpreter(str(venv_root / "no-headers-base"))
    if python is None:
        pytest.skip("cannot build a header-less interpreter from %s here: test Python.h on the fleet" % sys.base_prefix)
    return make_venv(str(venv_root / "no-headers"), python=python)


@pytest.fixture
def model_dir(tmp_path, standin_python):
    """A small llama-like model (no quantization)."""
    path = str(tmp_path / "llama")
    run([standin_python, "-m", "sglang_standin.make_model", path, "--arch", "llama", "--shards", "4"])
    return path


@pytest.fixture
def kimi_dir(tmp_path, standin_python):
    """A Kimi K2.6-like model: MLA config, nvfp4-pack-quantized compressed-tensors checkpoint."""
    path = str(tmp_path / "kimi")
    run([standin_python, "-m", "sglang_standin.make_model", path, "--arch", "kimi_k2", "--shards", "3"])
    return path


@pytest.fixture
def launch(tmp_path):
    """launch(python, model, *args, env=None, entry=None, port=None) -> Server; every process group is killed at teardown."""
    servers = []

    def start(python, model, *args, **kwargs):
        server = Server(python, model, args, env=kwargs.get("env"), tmp=tmp_path,
                        entry=kwargs.get("entry", ("-m", "sglang.launch_server")), port=kwargs.get("port"))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.kill()
