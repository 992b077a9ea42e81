from __future__ import annotations

import shutil
import tarfile
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memconsole.lib.embeddings import DEFAULT_MODEL, REGISTRY, ModelSpec, file_sha256, find_model_files

# chromadb's published all-MiniLM-L6-v2 ONNX archive and its sha256 (as pinned by chromadb itself).
MODEL_URL = "https://chroma-onnx-models.s3.amazonaws.com/all-MiniLM-L6-v2/onnx.tar.gz"
MODEL_SHA256 = "913d7300ceae3b2dbc2c50d1de4baacab4be7b9380491c27fab7418616a16ec3"
HUB_URL = "https://huggingface.co"


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


def download(url: str, path: Path, model: str) -> None:
    try:
        with urllib.request.urlopen(url, timeout=60) as response, path.open("wb") as out:
            shutil.copyfileobj(response, out)
    except OSError as exc:
        raise CommandError(
            f"cannot download the model ({exc}). Without a network, copy a {model} folder "
            "(model.onnx + tokenizer.json) and point MEMCONSOLE_MODEL_DIR at it."
        ) from exc


class Command(BaseCommand):
    help = (
        "Download an embedding model of the registry (default MEMCONSOLE_EMBEDDING_MODEL), verify its sha256 "
        "pins and install it into MEMCONSOLE_MODEL_DIR."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--model",
            choices=list(REGISTRY),
            help="which model (default: MEMCONSOLE_EMBEDDING_MODEL); another model than the configured one "
            "goes into a folder of its name beside MEMCONSOLE_MODEL_DIR",
        )
        parser.add_argument(
            "--from-file", help=f"{DEFAULT_MODEL}: install from an archive already on disk instead of downloading"
        )
        parser.add_argument("--url", default=MODEL_URL, help=f"{DEFAULT_MODEL}: where to download the archive from")
        parser.add_argument("--hub-url", default=HUB_URL, help="other models: the Hugging Face Hub to download from")
        parser.add_argument(
            "--allow-unpinned",
            action="store_true",
            help="install a file that has no published sha256 pin in the registry (its sha256 is printed)",
        )

    def handle(
        self,
        *args: Any,
        model: str | None = None,
        from_file: str | None = None,
        url: str = MODEL_URL,
        hub_url: str = HUB_URL,
        allow_unpinned: bool = False,
        **options: Any,
    ) -> None:
        configured = settings.MEMCONSOLE_EMBEDDING_MODEL
        name = model or configured
        if name not in REGISTRY:
            raise CommandError(f"unknown model {name!r}; choose one of {', '.join(REGISTRY)}")
        target = Path(settings.MEMCONSOLE_MODEL_DIR)
        if name != configured:
            target = target.parent / name
        if find_model_files(target):
            self.stdout.write(f"A model is already installed in {target}; nothing to do.")
            return
        if name == DEFAULT_MODEL:
            self._install_default(target, from_file, url)
        else:
            if from_file:
                raise CommandError(f"--from-file installs {DEFAULT_MODEL}'s archive only")
            self._install_files(REGISTRY[name], target, hub_url.rstrip("/"), allow_unpinned)
        self.stdout.write(self.style.SUCCESS(f"Model installed in {target}."))
        if name != configured:
            self.stdout.write(f"To use it: MEMCONSOLE_EMBEDDING_MODEL={name} MEMCONSOLE_MODEL_DIR={target}")

    def _install_default(self, target: Path, from_file: str | None, url: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(from_file) if from_file else Path(tmp) / "onnx.tar.gz"
            if not from_file:
                self.stderr.write(f"Downloading {url} …")
                download(url, archive, DEFAULT_MODEL)
            elif not archive.is_file():
                raise CommandError(f"{archive} does not exist")
            install_archive(archive, target, MODEL_SHA256)

    def _install_files(self, spec: ModelSpec, target: Path, hub_url: str, allow_unpinned: bool) -> None:
        """Download every file of `spec`, check each against its pin, then install them all (or none)."""
        unpinned = [f for f in spec.files if not f.sha256]
        if unpinned and not allow_unpinned:
            names = ", ".join(f"{f.repo}/{f.path}" for f in unpinned)
            raise CommandError(
                f"{spec.name}: no published sha256 pin for {names} ({unpinned[0].source}); nothing installed. "
                "Run again with --allow-unpinned to install it anyway."
            )
        with tempfile.TemporaryDirectory() as tmp:
            for item in spec.files:
                path = Path(tmp) / item.name
                source = f"{hub_url}/{item.url_path}"
                self.stderr.write(f"Downloading {source} …")
                download(source, path, spec.name)
                actual = file_sha256(path)
                if item.sha256 is None:
                    self.stderr.write(f"{item.name}: sha256 {actual} (not pinned: installed with --allow-unpinned)")
                elif actual != item.sha256:
                    raise CommandError(
                        f"checksum mismatch for {item.path}: expected {item.sha256}, got {actual}; nothing installed"
                    )
            target.mkdir(parents=True, exist_ok=True)
            for item in spec.files:
                shutil.copy2(Path(tmp) / item.name, target / item.name)
