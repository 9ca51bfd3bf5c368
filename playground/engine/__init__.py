"""The embedded inference engine: a Workers AI-compatible HTTP server around llama.cpp.

It runs as its own process (`python -m playground.engine`) and never touches Django or
its database: configuration comes from flags and `ENGINE_*` environment variables.
The parent process serves HTTP (Starlette on uvicorn) and routes work to replica
processes, each holding one model instance and its own prefix cache.
"""
