"""memconsole settings, read from the environment.

Every setting is documented in docs/operations.md. Local runs (the default, MEMCONSOLE_ENV=local)
work with no configuration at all: SQLite and embedded Chroma under var/, a secret key generated
once into var/. With MEMCONSOLE_ENV=production, SECRET_KEY must be given and cookies are secure.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import secrets
from pathlib import Path

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _

# Lets the classes that django-stubs types as generic (ModelAdmin[Model], ...) be subscripted at runtime.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name: str, default: str | None = None) -> str | None:
    """A string setting; NAME_FILE, when set, names a file holding the value (Docker secrets)."""
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_name!r} cannot be read: {exc}") from exc
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use 1/0, true/false, yes/no)")


def envint(name: str, default: int, minimum: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a whole number") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={value!r} must be at least {minimum}")
    return number


def envlist(name: str, default: str = "") -> list[str]:
    raw = env(name, default) or ""
    return [item.strip() for item in raw.split(",") if item.strip()]


MEMCONSOLE_ENV = (os.environ.get("MEMCONSOLE_ENV") or "local").strip().lower()
if MEMCONSOLE_ENV not in {"local", "production"}:
    raise ImproperlyConfigured(f"MEMCONSOLE_ENV={MEMCONSOLE_ENV!r} must be 'local' or 'production'")
PRODUCTION = MEMCONSOLE_ENV == "production"

VAR_DIR = Path(env("MEMCONSOLE_VAR_DIR") or BASE_DIR / "var")

DEBUG = envbool("DEBUG", False)

SECRET_KEY: str = env("SECRET_KEY") or ""
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("SECRET_KEY is required when MEMCONSOLE_ENV=production")
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    SECRET_KEY = key_file.read_text().strip()

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "" if PRODUCTION else "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "axes",
    "memconsole.memory",
    "memconsole.console",
    "memconsole.api",
    "memconsole.observability",
    "memconsole.jobs",
    "django_tasks",
    "django_tasks_db",
    "ninja",  # its templates and static files: the API docs page is served locally (no CDN, CSP)
]

MIDDLEWARE = [
    "memconsole.observability.middleware.observe_requests",  # first: request id, access log, metrics
    "django.middleware.security.SecurityMiddleware",
    "memconsole.console.middleware.security_headers",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "memconsole.console.middleware.time_zone",  # one zone for every console time (timezones.py)
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "memconsole.console.middleware.form_only_addresses",  # a page for a browser GET of a form-only URL
    "memconsole.console.middleware.AdminUnavailable",  # the Django admin: a 503 page, never a 500
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "memconsole.urls"
WSGI_APPLICATION = "memconsole.wsgi.application"

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
                "django.template.context_processors.i18n",
                "django.template.context_processors.tz",
                "memconsole.console.context.model_switch",
            ],
        },
    },
]

# Database: SQLite under var/ unless DATABASE_URL names another.
DATABASE_URL = env("DATABASE_URL")
if DATABASE_URL:
    try:
        DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from exc
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(VAR_DIR / "memconsole.sqlite3")}}

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets readers run beside the writer; IMMEDIATE transactions take the write lock at BEGIN,
    # which serialises audit-chain appends across processes (see memory/audit.py).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
        }
    )
DATABASES["default"].setdefault("TEST", {})

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "console:overview"
LOGOUT_REDIRECT_URL = "login"

# A working day of inactivity ends a session.
SESSION_COOKIE_AGE = envint("MEMCONSOLE_SESSION_SECONDS", 8 * 3600, minimum=300)
SESSION_SAVE_EVERY_REQUEST = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
SECURE = envbool("MEMCONSOLE_SECURE_COOKIES", PRODUCTION)
SESSION_COOKIE_SECURE = SECURE
CSRF_COOKIE_SECURE = SECURE
SECURE_SSL_REDIRECT = envbool("MEMCONSOLE_SSL_REDIRECT", PRODUCTION)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = envint("MEMCONSOLE_HSTS_SECONDS", 31536000 if PRODUCTION else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
MEMCONSOLE_BEHIND_PROXY = envbool("MEMCONSOLE_BEHIND_PROXY", False)
MEMCONSOLE_PROXY_COUNT = envint("MEMCONSOLE_PROXY_COUNT", 1, minimum=1)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if MEMCONSOLE_BEHIND_PROXY else None
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# Login rate limit (django-axes): per account and IP, state kept in the database so that every
# worker shares it.
AXES_FAILURE_LIMIT = envint("MEMCONSOLE_LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = envint("MEMCONSOLE_LOGIN_COOLOFF_MINUTES", 15, minimum=1) / 60
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_CLIENT_IP_CALLABLE = "memconsole.console.middleware.client_ip"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", _("English")), ("zh-hans", _("Simplified Chinese")), ("es", _("Spanish"))]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env("MEMCONSOLE_STATIC_ROOT") or BASE_DIR / "var" / "staticfiles")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = not PRODUCTION
if not PRODUCTION:
    # Local runs serve straight from static/ (finders); whitenoise still expects STATIC_ROOT to exist.
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)

# Logs (docs/operations.md, "Monitoring"): plain lines or JSON lines, each with the request id.
MEMCONSOLE_LOG_FORMAT = (env("MEMCONSOLE_LOG_FORMAT") or "plain").strip().lower()
if MEMCONSOLE_LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured(f"MEMCONSOLE_LOG_FORMAT={MEMCONSOLE_LOG_FORMAT!r} must be 'plain' or 'json'")
MEMCONSOLE_ACCESS_LOG = envbool("MEMCONSOLE_ACCESS_LOG", True)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"},
        "json": {"()": "memconsole.observability.logs.JsonFormatter"},
    },
    "filters": {
        "request_id": {"()": "memconsole.observability.logs.RequestIdFilter"},
        "one_line_forbidden": {"()": "memconsole.logfilters.OneLineForbidden"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": MEMCONSOLE_LOG_FORMAT, "filters": ["request_id"]}
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "memconsole": {"level": env("MEMCONSOLE_LOG_LEVEL", "INFO"), "propagate": True},
        "chromadb": {"level": "ERROR"},
        # A 403 is one line, not a traceback (a refused request is expected).
        "django.request": {"filters": ["one_line_forbidden"]},
    },
}

# --- memconsole ---------------------------------------------------------------------------------
CHROMA_PATH = Path(env("CHROMA_PATH") or VAR_DIR / "chroma")
CHROMA_HOST = env("CHROMA_HOST") or ""
CHROMA_PORT = envint("CHROMA_PORT", 8000, minimum=1)
CHROMA_SSL = envbool("CHROMA_SSL", False)

# Background jobs (memconsole/jobs, docs/operations.md "Jobs"): django-tasks' database backend, run by
# `manage.py jobs_worker`, or by a thread inside the one gunicorn worker when the index is embedded
# (two processes must not write one embedded Chroma folder).
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
MEMCONSOLE_JOBS_IN_WEB = envbool("MEMCONSOLE_JOBS_IN_WEB", not CHROMA_HOST)
# How often the job worker anchors every audit chain's head in a checkpoint (memory/checkpoints.py).
MEMCONSOLE_AUDIT_CHECKPOINT_SECONDS = envint("MEMCONSOLE_AUDIT_CHECKPOINT_SECONDS", 300, minimum=1)
# The newest checkpoint kept outside the database (a file on this machine; "" turns it off), so that
# checkpoints deleted together with what they anchored are detected. On by default in production.
_anchor = env("MEMCONSOLE_AUDIT_ANCHOR")
MEMCONSOLE_AUDIT_ANCHOR = (
    _anchor.strip() if _anchor is not None else str(VAR_DIR / "audit-anchor.json") if PRODUCTION else ""
)
# Write-behind vector indexing (memory/pending.py, docs/operations.md "Write-behind indexing"): a
# remember commits its vector with the episode and returns; "thread" drains them from a thread of each
# writing process, "worker" from the job worker, "inline" writes them before remember returns. Drained
# in batches within about MEMCONSOLE_INDEX_DELAY_MS of the write.
MEMCONSOLE_INDEXER = (env("MEMCONSOLE_INDEXER") or "thread").strip().lower()
if MEMCONSOLE_INDEXER not in {"thread", "worker", "inline"}:
    raise ImproperlyConfigured(f"MEMCONSOLE_INDEXER={MEMCONSOLE_INDEXER!r} must be 'thread', 'worker' or 'inline'")
MEMCONSOLE_INDEX_DELAY_MS = envint("MEMCONSOLE_INDEX_DELAY_MS", 200, minimum=0)
MEMCONSOLE_INDEX_BATCH = envint("MEMCONSOLE_INDEX_BATCH", 256, minimum=1)
MEMCONSOLE_JOBS_STALE_SECONDS = envint("MEMCONSOLE_JOBS_STALE_SECONDS", 120, minimum=2)
MEMCONSOLE_JOBS_POLL_SECONDS = envint("MEMCONSOLE_JOBS_POLL_SECONDS", 1, minimum=1)

# A name of lib/embeddings.REGISTRY (an unknown one fails at the first embedding, naming the choices).
MEMCONSOLE_EMBEDDING_MODEL = env("MEMCONSOLE_EMBEDDING_MODEL") or "all-MiniLM-L6-v2"
if not MEMCONSOLE_EMBEDDING_MODEL.replace("-", "").replace(".", "").replace("_", "").isalnum():
    raise ImproperlyConfigured(f"MEMCONSOLE_EMBEDDING_MODEL={MEMCONSOLE_EMBEDDING_MODEL!r} is not a model name")
_model_dir = env("MEMCONSOLE_MODEL_DIR")
MEMCONSOLE_MODEL_DIR = Path(_model_dir) if _model_dir else VAR_DIR / "models" / MEMCONSOLE_EMBEDDING_MODEL
# A model switch re-embeds the index in a thread of the serving process (memory/reembed.py), one
# process at a time (a lease of this many seconds in the database, renewed as it goes).
MEMCONSOLE_REEMBED_IN_BACKGROUND = envbool("MEMCONSOLE_REEMBED_IN_BACKGROUND", True)
MEMCONSOLE_REEMBED_LEASE_SECONDS = envint("MEMCONSOLE_REEMBED_LEASE_SECONDS", 60, minimum=2)

MEMCONSOLE_FERNET_KEYS = envlist("MEMCONSOLE_FERNET_KEYS")
for _position, _key in enumerate(MEMCONSOLE_FERNET_KEYS, 1):  # a key is never named: it is a secret
    try:
        _key_ok = len(base64.urlsafe_b64decode(_key.encode("ascii"))) == 32
    except (ValueError, UnicodeEncodeError):
        _key_ok = False
    if not _key_ok:
        raise ImproperlyConfigured(
            f"MEMCONSOLE_FERNET_KEYS: key {_position} is not a Fernet key (32 bytes in url-safe base64, "
            "as `python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'` makes)"
        )
MEMCONSOLE_AUDIT_KEY = env("MEMCONSOLE_AUDIT_KEY") or ""

MEMCONSOLE_RECENCY_HALF_LIFE_DAYS = envint("MEMCONSOLE_RECENCY_HALF_LIFE_DAYS", 30, minimum=1)


def envfraction(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None
    if not 0.0 <= number <= 1.0:
        raise ImproperlyConfigured(f"{name}={value!r} must be between 0 and 1")
    return number


# Recall's relevance floor (memory/retrieval.py): an episode whose fused relevance (0.7 × vector
# similarity + 0.3 × lexical score) is below it is neither recalled nor injected. 0 turns it off.
MEMCONSOLE_RECALL_MIN_SIMILARITY = envfraction("MEMCONSOLE_RECALL_MIN_SIMILARITY", 0.30)
# The lexical index's hashing key (memory/lexical.py); derived from SECRET_KEY when unset.
MEMCONSOLE_LEXICAL_KEY = env("MEMCONSOLE_LEXICAL_KEY") or ""
MEMCONSOLE_SNAPSHOT_RETENTION_DAYS = envint("MEMCONSOLE_SNAPSHOT_RETENTION_DAYS", 90, minimum=0)
# Conversation-window messages (memory/window.py) older than this are dropped; 0 keeps them.
MEMCONSOLE_WINDOW_RETENTION_DAYS = envint("MEMCONSOLE_WINDOW_RETENTION_DAYS", 30, minimum=0)
MEMCONSOLE_MAX_CONTENT_CHARS = envint("MEMCONSOLE_MAX_CONTENT_CHARS", 8000, minimum=100)
# Imports (memory/imports.py): files larger than this are refused before they are read.
MEMCONSOLE_IMPORT_MAX_BYTES = envint("MEMCONSOLE_IMPORT_MAX_BYTES", 64 * 1024 * 1024, minimum=1024)

# Bot API
MEMCONSOLE_API_MAX_BODY_BYTES = envint("MEMCONSOLE_API_MAX_BODY_BYTES", 256 * 1024, minimum=1024)
MEMCONSOLE_API_RATE_PER_MINUTE = envint("MEMCONSOLE_API_RATE_PER_MINUTE", 600, minimum=1)
# POST /api/v1/remember with a list: at most this many episodes in one request (memory/batch_remember.py).
MEMCONSOLE_REMEMBER_BATCH_MAX = envint("MEMCONSOLE_REMEMBER_BATCH_MAX", 256, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("MEMCONSOLE_UPLOAD_MAX_BYTES", 50 * 1024 * 1024, minimum=1024)

# Metrics (/metrics, docs/operations.md "Monitoring"): a bearer token and/or client networks; neither: 404.
MEMCONSOLE_METRICS_TOKEN = env("MEMCONSOLE_METRICS_TOKEN") or ""
if MEMCONSOLE_METRICS_TOKEN and len(MEMCONSOLE_METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("MEMCONSOLE_METRICS_TOKEN must be at least 16 characters (openssl rand -hex 32)")
MEMCONSOLE_METRICS_ALLOW = envlist("MEMCONSOLE_METRICS_ALLOW")
for _network in MEMCONSOLE_METRICS_ALLOW:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"MEMCONSOLE_METRICS_ALLOW: {_network!r} is not an address or network (e.g. 10.0.0.0/8)"
        ) from None
# Tracing (OpenTelemetry) is on when the standard OTLP endpoint variable is set.
_otlp_endpoint = env("OTEL_EXPORTER_OTLP_ENDPOINT") or env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
MEMCONSOLE_TRACING = bool(_otlp_endpoint) and not envbool("OTEL_SDK_DISABLED", False)
