"""`python -m playground.engine`: serve GGUF models over the Workers AI and OpenAI APIs.

The port opens only after every replica has loaded the model and passed its self-test;
if one cannot, the engine says why and exits with status 1 (`make run` then stops).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence

import uvicorn

from playground.engine.app import Engine, create_app
from playground.engine.config import EngineConfig, load_config
from playground.engine.model_file import ModelFileError, ServedModel, served_models
from playground.engine.pool import EngineStartupError

logger = logging.getLogger("playground.engine")


async def serve(config: EngineConfig, models: list[ServedModel]) -> None:
    engine = Engine(config, models)
    await engine.open()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(engine),
            host=config.host,
            port=config.port,
            log_level=config.log_level.lower(),
            access_log=False,  # request lines would add nothing the engine log lacks
            lifespan="off",  # the engine is opened above, before the port
            timeout_graceful_shutdown=5,
        )
    )
    try:
        await server.serve()
    finally:
        await engine.close()


def main(argv: Sequence[str] | None = None) -> None:
    config = load_config(argv)
    logging.basicConfig(level=config.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(serve(config, served_models(config)))
    except (ModelFileError, EngineStartupError) as exc:
        logger.error("The engine cannot start. %s", exc)
        sys.exit(1)


if __name__ == "__main__":
    main()
