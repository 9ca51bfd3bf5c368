"""Settings read from the environment, with embedded defaults that need no service.

Nothing set: SQLite, the in-memory channel layer, a filesystem Celery broker and the
embedded engine. `DATABASE_URL` and `REDIS_URL` switch to PostgreSQL and Redis.
Every variable is documented in `.env.example`.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import dj_database_url
import django_stubs_ext
from celery.schedules import crontab
from django.utils.csp import CSP

from playground.lib.env import (
    env_bool,
    env_float,
    env_int,
    env_list,
    env_secret,
    env_str,
    persistent_secret,
    secrets_required,
)

# `ModelAdmin[UsageRecord]`, `ModelForm[ProviderConnection]`: generic at run time too, for mypy --strict.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("PLAYGROUND_DATA_DIR", str(BASE_DIR / "var")))

DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    secrets_required(
        "SECRET_KEY",
        "FIELD_ENCRYPTION_KEY",
        why=(
            "The production profile (DATABASE_URL is set) does not generate them into "
            "PLAYGROUND_DATA_DIR: each host would make its own, and none could read the "
            "provider tokens or sessions another saved."
        ),
    )
SECRET_KEY = persistent_secret("SECRET_KEY", DATA_DIR / "secret_key")
FIELD_ENCRYPTION_KEY = persistent_secret("FIELD_ENCRYPTION_KEY", DATA_DIR / "field_encryption_key")
# Old keys still decrypt while tokens are re-encrypted (`manage.py rotate_tokens`).
FIELD_ENCRYPTION_KEY_PREVIOUS = [key for key in env_secret("FIELD_ENCRYPTION_KEY_PREVIOUS").split(",") if key]
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS") or ["127.0.0.1", "localhost", "[::1]"]
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "playground.accounts.apps.SuperuserAdminConfig",  # django.contrib.admin, superusers only
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "servestatic.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "axes",
    "playground.accounts",
    "playground.catalog",
    "playground.providers",
    "playground.usage",
    "playground.presets",
    "playground.routing",
    "playground.alerts",
    "playground.chat",
    "playground.teams",
    "playground.batches",
    "playground.evals",
    "playground.analytics",
    "playground.gateway",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "servestatic.middleware.ServeStaticMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every view needs a signed-in user unless it is marked `login_not_required`
    # (tests/core/test_url_access.py holds the list of public routes).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks: turns a lockout into its response
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
                "playground.teams.context.topbar",
            ],
        },
    }
]

if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
else:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(DATA_DIR / "playground.sqlite3"),
            # WAL lets the web process, the Celery worker and tests read while one writes.
            # synchronous=NORMAL, SQLite's advice for WAL: a commit no longer waits for the disk
            # (an fsync each, a third of the gateway's database time, issue 24); the database
            # stays intact, and only a power cut can lose the last moments' commits.
            # secure_delete: a deleted or overwritten value is zeroed where it lay, not left in a
            # freed page (issue 37; usage.reclaim then empties the log, which held the old pages).
            "OPTIONS": {
                "init_command": (
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA secure_delete=ON;"
                ),
                "timeout": 20,
            },
            # Kept a minute, as on PostgreSQL: Channels closes "old" connections around each
            # database call of a consumer, so with 0 every chat turn reopened the file several
            # times (a profile of benchmarks/stream_relay.py at 200 streams: 7 % of the process).
            "CONN_MAX_AGE": 60,
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
    for _sub in ("out", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://localhost/"  # no host: kombu warns on every connection
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "out"),
        "data_folder_out": str(_broker_dir / "out"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),  # worker broadcasts; default: ./control
        "store_processed": False,
    }
CELERY_TASK_ACKS_LATE = True
# The queue tasks go to (and a worker reads); tests give each run its own on a shared Redis.
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "celery")
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 900)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 30
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)

# --- retention (issue 37, playground.usage.retention): the beat process runs it daily ---
RETENTION_AT_UTC = (env_int("RETENTION_HOUR_UTC", 3), env_int("RETENTION_MINUTE_UTC", 17))
RETENTION_CHUNK = env_int("RETENTION_CHUNK", 500)  # records per transaction
CELERY_BEAT_SCHEDULE = {
    "usage-retention": {
        "task": "playground.usage.tasks.retention_sweep",
        "schedule": crontab(hour=RETENTION_AT_UTC[0], minute=RETENTION_AT_UTC[1]),
    }
}
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
# --- idempotent answers (issue 37, playground.gateway.idempotency): deleted once their window ends ---
CELERY_BEAT_SCHEDULE["idempotent-answers-expire"] = {
    "task": "playground.gateway.tasks.idempotency_answers_expire",
    "schedule": 300.0,
}
# --- routing decisions sealed in a hash chain per team (issue 37, playground.usage.routing_seals) ---
ROUTING_SEAL_SETTLE_SECONDS = env_int("ROUTING_SEAL_SETTLE_SECONDS", 60)  # a record this old is sealed
ROUTING_SEAL_MARGIN_SECONDS = env_int("ROUTING_SEAL_MARGIN_SECONDS", 600)  # a commit this late is still found
ROUTING_SEAL_BATCH = env_int("ROUTING_SEAL_BATCH", 1000)  # decisions per transaction
CELERY_BEAT_SCHEDULE["routing-decisions-seal"] = {
    "task": "playground.usage.tasks.routing_decisions_seal",
    "schedule": 60.0,
}
# --- alerts (issue 41, playground.alerts): each team's rules looked at once a minute ---
CELERY_BEAT_SCHEDULE["alerts-evaluate"] = {
    "task": "playground.alerts.tasks.alerts_evaluate_all",
    "schedule": 60.0,
}

# --- batches (see playground.batches.services) ---
BATCH_CONCURRENCY = env_int("BATCH_CONCURRENCY", 4)  # requests in flight per batch without a queue
BATCH_UPLOAD_MAX_BYTES = env_int("BATCH_UPLOAD_MAX_BYTES", 100 * 1000 * 1000)
BATCH_SUBMISSION_MAX_BYTES = env_int("BATCH_SUBMISSION_MAX_BYTES", 10 * 1000 * 1000 - 64 * 1024)
# At most; a batch is split into about ten (batches.services.queue_path.submission_items).
BATCH_SUBMISSION_MAX_ITEMS = env_int("BATCH_SUBMISSION_MAX_ITEMS", 500)
BATCH_SUBMIT_MAX_ATTEMPTS = env_int("BATCH_SUBMIT_MAX_ATTEMPTS", 6)
BATCH_POLL_FIRST_SECONDS = env_float("BATCH_POLL_FIRST_SECONDS", 1.0)
# Polls are scheduled by countdown; kept below the Redis visibility timeout (an ETA task held
# longer than that would be handed to a second worker).
BATCH_POLL_MAX_SECONDS = min(
    env_float("BATCH_POLL_MAX_SECONDS", 15.0),
    float(CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 3600)) / 2,  # type: ignore[arg-type]
)
BATCH_POLL_MAX_ERRORS = env_int("BATCH_POLL_MAX_ERRORS", 10)
BATCH_POLLS_PER_STEP = env_int("BATCH_POLLS_PER_STEP", 10)
BATCH_RESULT_EXPIRY_SECONDS = env_int("BATCH_RESULT_EXPIRY_SECONDS", 24 * 3600)
BATCH_STEP_SECONDS = env_int("BATCH_STEP_SECONDS", 120)  # a concurrent step's time slice
BATCH_STEP_RETRY_SECONDS = env_float("BATCH_STEP_RETRY_SECONDS", 30.0)
BATCH_LEASE_SECONDS = env_float("BATCH_LEASE_SECONDS", 60.0)  # renewed every third of it
BATCH_STALL_GRACE_SECONDS = env_float("BATCH_STALL_GRACE_SECONDS", 60.0)
BATCH_ESTIMATE_OUTPUT_TOKENS = env_int("BATCH_ESTIMATE_OUTPUT_TOKENS", 256)  # when an item sets no max_tokens
BATCH_ESTIMATE_CACHE_SHARE = env_float("BATCH_ESTIMATE_CACHE_SHARE", 0.5)
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440  # bigger uploads go to a temporary file (batch inputs)

# The chat limits (turn rate, concurrent turns) count per user across processes: in Redis
# when there is one, else in this process (the embedded profile runs one web process).
CACHES: dict[str, dict[str, object]]
if REDIS_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
else:
    # Far above Django's 300 entries: past that many, every new key evicted a third of them,
    # live chat state included (a streaming turn's slot; the turn counts lived here too before
    # `lib.ratelimit`), and a count evicted mid-turn failed it (benchmarks/stream_relay.py, 200 users).
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "OPTIONS": {"MAX_ENTRIES": 200_000},
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # refuses locked-out logins before checking the password
    "django.contrib.auth.backends.ModelBackend",
    # Single sign-on (docs/sso.md): answers the OpenID Connect callback only, when OIDC_ISSUER is set.
    "playground.teams.sso.backend.SsoBackend",
]
# Login limits (site and admin login alike): 10 failures in 15 minutes for one username, or
# from one client address, lock that username or address out for 15 minutes after the
# last failure; the lockout page answers 429 with Retry-After. The client address is
# REMOTE_ADDR: uvicorn sets it from X-Forwarded-For only for trusted proxies.
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_LOCKOUT_CALLABLE = "playground.accounts.lockout.lockout_response"
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
# --- single sign-on with OpenID Connect (docs/sso.md; mozilla-django-oidc) ---
# Off unless OIDC_ISSUER is set; the endpoints are discovered from
# <issuer>/.well-known/openid-configuration on the first sign-in and kept an hour.
OIDC_ISSUER = env_str("OIDC_ISSUER").rstrip("/")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")  # the button says "Sign in with <it>"
OIDC_RP_CLIENT_ID = env_str("OIDC_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env_secret("OIDC_CLIENT_SECRET")  # never logged
OIDC_RP_SCOPES = env_str("OIDC_SCOPES", "openid email profile")
OIDC_RP_SIGN_ALGO = env_str("OIDC_SIGN_ALGO", "RS256")
# A userinfo claim holding "team-slug:role" (or a list of them): a user not yet in that team joins it.
OIDC_TEAM_CLAIM = env_str("OIDC_TEAM_CLAIM")
# Accounts that single sign-on creates get no password: the password form refuses them.
OIDC_DISABLE_PASSWORDS = env_bool("OIDC_DISABLE_PASSWORDS", False)
OIDC_USE_PKCE = True
OIDC_AUTHENTICATION_CALLBACK_URL = "sso:callback"  # register https://<host>/sso/callback/ at the provider
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT", 10.0)  # seconds for each call to the provider
OIDC_CLOCK_SKEW_SECONDS = env_int("OIDC_CLOCK_SKEW_SECONDS", 60)  # leeway on the ID token's exp and iat
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
    "staticfiles": {"BACKEND": "servestatic.storage.CompressedStaticFilesStorage"},
}

# --- the embedded engine and upstream calls ---
ENGINE_URL = env_str("ENGINE_URL", "http://127.0.0.1:8788")
ENGINE_API_TOKEN = persistent_secret("ENGINE_API_TOKEN", DATA_DIR / "engine_api_token")
# The engine's default model, which new conversations and batches on an engine connection start
# with (the engine also serves @local/gemma-3-270m; its /models lists what it serves).
ENGINE_MODEL_ID = env_str("ENGINE_MODEL_ID", "@local/smollm2-135m-instruct")
# Hosts (or CIDRs) that provider base URLs may point at even though they are private or
# loopback. The engine's own address is always allowed.
PROVIDER_HOST_ALLOWLIST = env_list("PROVIDER_HOST_ALLOWLIST")
UPSTREAM_CONNECT_TIMEOUT = env_float("UPSTREAM_CONNECT_TIMEOUT", 10.0)
UPSTREAM_FIRST_TOKEN_TIMEOUT = env_float("UPSTREAM_FIRST_TOKEN_TIMEOUT", 120.0)
UPSTREAM_TOTAL_TIMEOUT = env_float("UPSTREAM_TOTAL_TIMEOUT", 600.0)
UPSTREAM_MAX_RETRIES = env_int("UPSTREAM_MAX_RETRIES", 2)
UPSTREAM_MAX_RETRY_AFTER = env_float("UPSTREAM_MAX_RETRY_AFTER", 20.0)
# Upstream connections on the loop's own transports (`providers.sockets.LoopStream`); off, on
# httpcore's own (anyio) stream: the way back if an httpx/httpcore upgrade breaks the custom one.
UPSTREAM_LOOP_STREAM = env_bool("UPSTREAM_LOOP_STREAM", True)

# --- gateway (playground.gateway) ---
# Threads, each with a PostgreSQL connection, that run the gateway's database work
# (`lib.db.db_run`); SQLite uses one.
DB_THREADS = env_int("DB_THREADS", 8)
# The largest request body the gateway reads (images travel base64 inside it).
GATEWAY_MAX_BODY_BYTES = env_int("GATEWAY_MAX_BODY_BYTES", 20_000_000)

# --- budgets ---
# Output tokens reserved for a request that sets no max_tokens (see playground.usage.budgets).
BUDGET_DEFAULT_MAX_TOKENS = env_int("BUDGET_DEFAULT_MAX_TOKENS", 4096)
# A reservation not reconciled after this many seconds (its process died) is released.
BUDGET_RESERVATION_TTL = env_int("BUDGET_RESERVATION_TTL", 3600)
# Each process looks for such reservations of a team at most this often (seconds), not on
# every request it admits.
BUDGET_SWEEP_EVERY = env_int("BUDGET_SWEEP_EVERY", 30)
# A price card looked up is reused this long (seconds) by the process that looked it up; a
# change saved in that process applies at once, one saved in another process after this.
PRICE_CARD_CACHE_SECONDS = env_int("PRICE_CARD_CACHE_SECONDS", 5)
# Under load, the usage records of calls ending together are written in one group at most this
# often (milliseconds, `usage.calls.settlement`); a call ending alone is written at once.
USAGE_SETTLE_EVERY_MS = env_int("USAGE_SETTLE_EVERY_MS", 20)
# How a redacted record reads a phone number written without its country code (+44...): as a
# number of this region (ISO 3166 code, as libphonenumber names it; playground.lib.redaction).
REDACTION_PHONE_REGION = env_str("REDACTION_PHONE_REGION", "US")

# --- exports ---
# Who the FOCUS export names as the provider, publisher and invoice issuer of its charges: the
# playground prices them with its own cards (docs/usage-analytics.md, "FOCUS export").
FOCUS_PROVIDER_NAME = env_str("FOCUS_PROVIDER_NAME", "Inference Playground")
# Set, every usage record is also sent as an OpenTelemetry GenAI span over OTLP/HTTP to
# {endpoint}/v1/traces, in the background (playground.usage.telemetry). The exporter itself
# reads the standard OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT and _COMPRESSION variables.
OTEL_EXPORTER_OTLP_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_ENDPOINT", "")
OTEL_SERVICE_NAME = env_str("OTEL_SERVICE_NAME", "playground")
# Budget alerts go out through Django's email backend: the console unless configured.
_EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
MAILERS = {
    "default": {
        "BACKEND": _EMAIL_BACKEND,
        "OPTIONS": (
            {"host": env_str("EMAIL_HOST", "localhost"), "port": env_int("EMAIL_PORT", 25), "timeout": 10}
            if _EMAIL_BACKEND.endswith("smtp.EmailBackend")
            else {}
        ),
    }
}
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "playground@localhost")

# --- operations: /healthz, /readyz, /metrics (playground.probes, docs/operations.md) ---
# Set, /readyz and /metrics answer only `Authorization: Bearer <token>`; unset, /metrics answers
# loopback clients only.
METRICS_TOKEN = env_secret("METRICS_TOKEN")
# How long /readyz waits for each dependency (seconds) before calling it unavailable.
READYZ_TIMEOUT = env_float("READYZ_TIMEOUT", 1.0)
# Read by prometheus_client itself: each process's counters go to files in this folder, summed by
# /metrics (`make run` sets and empties it). Made here when missing, so a process never fails to count.
_metrics_dir = env_str("PROMETHEUS_MULTIPROC_DIR")
if _metrics_dir:
    Path(_metrics_dir).mkdir(parents=True, exist_ok=True)

# --- browser security headers ---
# A strict Content-Security-Policy: scripts and styles only from our own static files (no
# inline script or style, no eval), sockets and fetches to this origin only.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
# HTTPS: on by default in the production profile, which runs behind a TLS-terminating
# proxy that sets X-Forwarded-Proto (and must overwrite a client's own).
HTTPS = env_bool("HTTPS", bool(DATABASE_URL))
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 60 * 60 * 24 * 365)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)

# --- chat socket limits (per user, across sockets and processes; see playground.chat.limits) ---
CHAT_MAX_FRAME_BYTES = env_int("CHAT_MAX_FRAME_BYTES", 512 * 1024)
CHAT_TURNS_PER_MINUTE = env_int("CHAT_TURNS_PER_MINUTE", 20)
CHAT_MAX_CONCURRENT_TURNS = env_int("CHAT_MAX_CONCURRENT_TURNS", 3)
# Streamed text arriving within this many ms of the last frame joins the next one (chat.sockets.relay).
CHAT_STREAM_FRAME_MS = env_float("CHAT_STREAM_FRAME_MS", 5.0)

# --- image attachments (see playground.chat.domain.attachments) ---
# Uploaded images are stored under MEDIA_ROOT through Django's storage API and served only
# by the attachment view to members of the conversation's team: there is no MEDIA_URL route.
MEDIA_ROOT = Path(env_str("MEDIA_ROOT", str(DATA_DIR / "media")))
ATTACHMENT_MAX_BYTES = env_int("ATTACHMENT_MAX_BYTES", 20 * 1024 * 1024)  # per file, checked while reading
ATTACHMENT_MAX_SIDE = env_int("ATTACHMENT_MAX_SIDE", 2048)  # longer sides are downscaled to this
# Refused before decoding (a decompression bomb declares a huge canvas in a small file).
ATTACHMENT_MAX_PIXELS = env_int("ATTACHMENT_MAX_PIXELS", 50_000_000)
ATTACHMENTS_PER_TURN = env_int("ATTACHMENTS_PER_TURN", 8)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # httpx logs full request URLs at INFO; keep it quiet so nothing sensitive leaks.
    # django-axes logs every successful login at INFO; its lockouts are warnings.
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
        "axes": {"level": "WARNING"},
    },
}
