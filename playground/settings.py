"""Settings read from the environment, with embedded defaults that need no service.

Nothing set: SQLite, the in-memory channel layer, a filesystem Celery broker and the
embedded engine. `DATABASE_URL` and `REDIS_URL` switch to PostgreSQL and Redis.
Every variable is documented in `.env.example`.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url

from playground.env import env_bool, env_float, env_int, env_list, env_secret, env_str, persistent_secret

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("PLAYGROUND_DATA_DIR", str(BASE_DIR / "var")))

SECRET_KEY = persistent_secret("SECRET_KEY", DATA_DIR / "secret_key")
FIELD_ENCRYPTION_KEY = persistent_secret("FIELD_ENCRYPTION_KEY", DATA_DIR / "field_encryption_key")
# Old keys still decrypt while tokens are re-encrypted (`manage.py rotate_tokens`).
FIELD_ENCRYPTION_KEY_PREVIOUS = [key for key in env_secret("FIELD_ENCRYPTION_KEY_PREVIOUS").split(",") if key]
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS") or ["127.0.0.1", "localhost", "[::1]"]
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "playground.accounts",
    "playground.catalog",
    "playground.providers",
    "playground.usage",
    "playground.chat",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "playground.urls"
ASGI_APPLICATION = "playground.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
else:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(DATA_DIR / "playground.sqlite3"),
            # WAL lets the web process, the Celery worker and tests read while one writes.
            "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL;", "timeout": 20},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": None}]},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": 3600}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # The filesystem transport needs no server and still crosses processes (web -> worker).
    _broker_dir = DATA_DIR / "celery-broker"
    for _sub in ("out", "processed"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        "store_processed": False,
    }
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 900)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 30
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat:conversation-list"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- the embedded engine and upstream calls ---
ENGINE_URL = env_str("ENGINE_URL", "http://127.0.0.1:8788")
ENGINE_API_TOKEN = persistent_secret("ENGINE_API_TOKEN", DATA_DIR / "engine_api_token")
ENGINE_MODEL_ID = env_str("ENGINE_MODEL_ID", "@local/gemma-3-270m")
# Hosts (or CIDRs) that provider base URLs may point at even though they are private or
# loopback. The engine's own address is always allowed.
PROVIDER_HOST_ALLOWLIST = env_list("PROVIDER_HOST_ALLOWLIST")
UPSTREAM_CONNECT_TIMEOUT = env_float("UPSTREAM_CONNECT_TIMEOUT", 10.0)
UPSTREAM_FIRST_TOKEN_TIMEOUT = env_float("UPSTREAM_FIRST_TOKEN_TIMEOUT", 120.0)
UPSTREAM_TOTAL_TIMEOUT = env_float("UPSTREAM_TOTAL_TIMEOUT", 600.0)
UPSTREAM_MAX_RETRIES = env_int("UPSTREAM_MAX_RETRIES", 2)
UPSTREAM_MAX_RETRY_AFTER = env_float("UPSTREAM_MAX_RETRY_AFTER", 20.0)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # httpx logs full request URLs at INFO; keep it quiet so nothing sensitive leaks.
    "loggers": {"httpx": {"level": "WARNING"}, "httpcore": {"level": "WARNING"}},
}
