"""`python -m playground.engine`: serve a GGUF model over the Workers AI and OpenAI APIs."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

import uvicorn

from playground.engine.app import create_app
from playground.engine.config import load_config
from playground.engine.model_file import ModelFileError, resolve_model_path

logger = logging.getLogger("playground.engine")


def main(argv: Sequence[str] | None = None) -> None:
    config = load_config(argv)
    logging.basicConfig(level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        model_path = resolve_model_path(config.model_path, config.cache_dir)
    except ModelFileError as exc:
        logger.error("%s", exc)
        sys.exit(1)
    uvicorn.run(
        create_app(config, model_path),
        host=config.host,
        port=config.port,
        log_level=config.log_level.lower(),
        access_log=False,  # request lines would add nothing the engine log lacks
        timeout_graceful_shutdown=5,
    )


if __name__ == "__main__":
    main()
