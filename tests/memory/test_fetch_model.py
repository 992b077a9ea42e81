"""`manage.py fetch_model`: install chromadb's model archive only when its checksum matches.

No network here: the archive is built in the test from the shared model folder, laid out the way
chromadb publishes it (an `onnx/` folder), and installed with --from-file and --url file://.
"""

from __future__ import annotations

import hashlib
import tarfile

import pytest
from django.core.management import CommandError, call_command

from memconsole.lib import embeddings
from memconsole.memory.management.commands import fetch_model
from tests.conftest import MODEL_DIR


@pytest.fixture
def archive(tmp_path):
    path = tmp_path / "onnx.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name in ("model.onnx", "tokenizer.json", "config.json", "vocab.txt"):
            tar.add(MODEL_DIR / name, arcname=f"onnx/{name}")
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


def test_it_installs_a_verified_archive_and_the_embedder_uses_it(archive, settings, tmp_path, monkeypatch, capsys):
    path, digest = archive
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "model"
    monkeypatch.setattr(fetch_model, "MODEL_SHA256", digest)

    call_command("fetch_model", "--from-file", str(path))

    assert "Model installed" in capsys.readouterr().out
    assert (tmp_path / "model" / "model.onnx").read_bytes() == (MODEL_DIR / "model.onnx").read_bytes()
    assert not embeddings.get_embedder().is_fallback
    call_command("fetch_model", "--from-file", str(path))
    assert "already installed" in capsys.readouterr().out


def test_it_downloads_from_a_url_and_verifies_it(archive, settings, tmp_path, monkeypatch):
    path, digest = archive
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "model"
    monkeypatch.setattr(fetch_model, "MODEL_SHA256", digest)

    call_command("fetch_model", "--url", path.as_uri())

    assert embeddings.find_model_files(tmp_path / "model") is not None


def test_it_refuses_an_archive_whose_checksum_does_not_match(archive, settings, tmp_path):
    path, _ = archive  # checked against chromadb's published sha256, which this archive is not
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "model"
    with pytest.raises(CommandError, match="checksum mismatch"):
        call_command("fetch_model", "--from-file", str(path))
    assert not (tmp_path / "model").exists()


def test_it_says_how_to_work_offline_when_the_download_fails(settings, tmp_path):
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "model"
    with pytest.raises(CommandError, match="MEMCONSOLE_MODEL_DIR"):
        call_command("fetch_model", "--url", (tmp_path / "missing.tar.gz").as_uri())
