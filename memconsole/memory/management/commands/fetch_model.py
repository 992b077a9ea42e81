from __future__ import annotations

import shutil
import tarfile
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.lib.embeddings import file_sha256, find_model_files

# chromadb's published all-MiniLM-L6-v2 ONNX archive and its sha256 (as pinned by chromadb itself).
MODEL_URL = "https://chroma-onnx-models.s3.amazonaws.com/all-MiniLM-L6-v2/onnx.tar.gz"
MODEL_SHA256 = "913d7300ceae3b2dbc2c50d1de4baacab4be7b9380491c27fab7418616a16ec3"


def install_archive(archive: Path, target: Path, expected_sha256: str) -> None:
    """Verify `archive` and unpack its model files into `target` (no path outside it is written)."""
    actual = file_sha256(archive)
    if actual != expected_sha256:
        raise CommandError(f"checksum mismatch: expected {expected_sha256}, got {actual}; nothing installed")
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(archive, "r:gz") as tar:
        tar.extractall(tmp, filter="data")
        files = find_model_files(Path(tmp)) or find_model_files(Path(tmp) / "onnx")
        if files is None:
            raise CommandError("the archive holds no model.onnx and tokenizer.json; nothing installed")
        target.mkdir(parents=True, exist_ok=True)
        for item in files.onnx.parent.iterdir():
            if item.is_file():
                shutil.copy2(item, target / item.name)


class Command(BaseCommand):
    help = (
        "Download chromadb's all-MiniLM-L6-v2 ONNX archive, verify its sha256 and install it into MEMCONSOLE_MODEL_DIR."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from-file", help="install from an archive already on disk instead of downloading")
        parser.add_argument("--url", default=MODEL_URL, help="where to download the archive from")

    def handle(self, *args: Any, from_file: str | None = None, url: str = MODEL_URL, **options: Any) -> None:
        target = Path(settings.MEMCONSOLE_MODEL_DIR)
        if find_model_files(target):
            self.stdout.write(f"A model is already installed in {target}; nothing to do.")
            return
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(from_file) if from_file else Path(tmp) / "onnx.tar.gz"
            if not from_file:
                self.stderr.write(f"Downloading {url} …")
                try:
                    with urllib.request.urlopen(url, timeout=60) as response, archive.open("wb") as out:
                        shutil.copyfileobj(response, out)
                except OSError as exc:
                    raise CommandError(
                        f"cannot download the model ({exc}). Without a network, copy an all-MiniLM-L6-v2 folder "
                        "(model.onnx + tokenizer.json) and point MEMCONSOLE_MODEL_DIR at it."
                    ) from exc
            elif not archive.is_file():
                raise CommandError(f"{archive} does not exist")
            install_archive(archive, target, MODEL_SHA256)
        self.stdout.write(self.style.SUCCESS(f"Model installed in {target}."))
