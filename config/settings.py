"""Quire settings, read from the environment.

Two ways to run: the embedded default (SQLite in WAL mode, a SQLite Celery broker, media on
local disk under ./var) when nothing is set, and production (QUIRE_ENV=production) where
DATABASE_URL, CELERY_BROKER_URL, SECRET_KEY and ALLOWED_HOSTS come from the environment.
README.md lists every variable.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config.env import (
    database_from_url,
    env_bool,
    env_int,
    env_list,
    env_path,
    env_required,
    env_str,
    sqlite_database,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = env_path("QUIRE_VAR_DIR", BASE_DIR / "var")

QUIRE_ENV = (env_str("QUIRE_ENV", "development") or "development").strip().lower()
if QUIRE_ENV not in {"development", "production"}:
    raise ImproperlyConfigured(f"QUIRE_ENV must be 'development' or 'production'; got {QUIRE_ENV!r}.")
PRODUCTION = QUIRE_ENV == "production"

DEBUG = env_bool("DEBUG", default=False)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DEBUG must not be on in production.")


def _development_secret_key() -> str:
    """A random key kept in ./var so sessions survive restarts; never used in production."""
    key_file = VAR_DIR / "secret-key"
    if key_file.exists():
        return key_file.read_text().strip()
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    key_file.write_text(key)
    key_file.chmod(0o600)
    return key


if PRODUCTION:
    SECRET_KEY = env_required("SECRET_KEY")
    ALLOWED_HOSTS = env_list("ALLOWED_HOSTS")
    if not ALLOWED_HOSTS:
        raise ImproperlyConfigured("ALLOWED_HOSTS must be set in production (QUIRE_ENV=production).")
else:
    SECRET_KEY = env_str("SECRET_KEY") or _development_secret_key()
    ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "allauth",
    "allauth.account",
    "accounts",
    "annotation",
    "reviews",
    "evaluation",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "allauth.account.middleware.AccountMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

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

_database_url = env_str("DATABASE_URL")
if _database_url:
    _default_database = database_from_url(_database_url)
elif PRODUCTION:
    raise ImproperlyConfigured("DATABASE_URL must be set in production (QUIRE_ENV=production).")
else:
    _default_database = sqlite_database(VAR_DIR / "quire.sqlite3")
if _default_database["ENGINE"].endswith("sqlite3"):
    # Tests on SQLite use a file, not memory, so a real Celery worker process can see them.
    _default_database["TEST"] = {"NAME": str(VAR_DIR / "test-quire.sqlite3")}
DATABASES = {"default": _default_database}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "accounts.User"
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "home"
ACCOUNT_LOGIN_METHODS = {"email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = "none" if not PRODUCTION else "optional"
ACCOUNT_ADAPTER = "accounts.adapter.AccountAdapter"
ACCOUNT_LOGOUT_ON_GET = False
QUIRE_SIGNUP_OPEN = env_bool("QUIRE_SIGNUP_OPEN", default=False)

EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if PRODUCTION else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", default=False)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "quire@localhost")

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = env_path("STATIC_ROOT", VAR_DIR / "static")
MEDIA_URL = "media/"
MEDIA_ROOT = env_path("MEDIA_ROOT", VAR_DIR / "media")
IMPORT_UPLOAD_ROOT = env_path("QUIRE_IMPORT_UPLOAD_ROOT", VAR_DIR / "uploads")
# Finished gold exports (reviews app), served only through access-checked downloads.
QUIRE_EXPORT_ROOT = env_path("QUIRE_EXPORT_ROOT", VAR_DIR / "exports")
# Figures larger than this many pixels are refused as possible decompression bombs.
QUIRE_MAX_IMAGE_PIXELS = env_int("QUIRE_MAX_IMAGE_PIXELS", 40_000_000, minimum=1)
QUIRE_MAX_IMAGE_BYTES = env_int("QUIRE_MAX_IMAGE_BYTES", 25 * 1024 * 1024, minimum=1)
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
QUIRE_MAX_UPLOAD_BYTES = env_int("QUIRE_MAX_UPLOAD_BYTES", 2 * 1024 * 1024 * 1024, minimum=1)

# Security headers. HSTS and secure cookies only when the site is served over HTTPS.
QUIRE_HTTPS = env_bool("QUIRE_HTTPS", default=PRODUCTION)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = QUIRE_HTTPS
CSRF_COOKIE_SECURE = QUIRE_HTTPS
SECURE_SSL_REDIRECT = QUIRE_HTTPS and env_bool("QUIRE_SSL_REDIRECT", default=True)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if QUIRE_HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = QUIRE_HTTPS
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("QUIRE_BEHIND_PROXY") else None
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; "
    "form-action 'self'; frame-ancestors 'none'"
)

REST_FRAMEWORK = {
    # Token first: a request without credentials then gets 401 with "WWW-Authenticate: Token".
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "annotation.api_errors.api_exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Quire API",
    "DESCRIPTION": (
        "Scripted annotation: claim the next item of a project, submit an annotation, list your own "
        "annotations. Send `Authorization: Token <key>`; each user makes their key on the API token "
        "page, /accounts/api-token/."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from drf-spectacular-sidecar's static files, never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No validator badge: it would send the schema's address to swagger.io.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    # The API is for members; so is its description.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
}

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or (
    None if PRODUCTION else f"sqla+sqlite:///{VAR_DIR / 'celery-broker.sqlite3'}"
)
if not CELERY_BROKER_URL:
    raise ImproperlyConfigured("CELERY_BROKER_URL must be set in production (QUIRE_ENV=production).")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Longer than any task's hard time limit, so a running task is never handed to a second worker.
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 4 * 3600, minimum=60)
# Redis (and SQS) redeliver an unacknowledged task after the visibility timeout. The embedded
# SQLAlchemy transport hands transport options to create_engine(), which refuses this one.
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {} if CELERY_BROKER_URL.startswith("sqla+") else {"visibility_timeout": CELERY_TASK_TIME_LIMIT + 600}
)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redis holding each model endpoint's concurrency slots and per-minute windows
# (evaluation/limits/), so the limits hold for every worker on every machine. Defaults to
# CELERY_BROKER_URL when that is Redis; with neither, the limits live in VAR_DIR/limiter.sqlite3
# and hold across the processes of one machine (embedded mode).
QUIRE_LIMITER_REDIS_URL = env_str("QUIRE_LIMITER_REDIS_URL") or (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else None
)
# Model endpoints' API keys stored in the database are encrypted with this key (Fernet, derived
# from it); without it, from SECRET_KEY, so rotating SECRET_KEY then means entering them again.
QUIRE_ENDPOINT_KEY = env_str("QUIRE_ENDPOINT_KEY") or ""
# The evaluation job engine (evaluation/services/engine.py): a chunk's lease, renewed while a
# worker holds it (a killed worker's chunk goes to another once it runs out); how long one task
# works before handing its run on; the most request threads per worker; tasks working per run.
QUIRE_EVALUATION_LEASE_SECONDS = env_int("QUIRE_EVALUATION_LEASE_SECONDS", 60, minimum=10)
QUIRE_EVALUATION_TASK_SECONDS = env_int("QUIRE_EVALUATION_TASK_SECONDS", 600, minimum=30)
QUIRE_EVALUATION_MAX_THREADS = env_int("QUIRE_EVALUATION_MAX_THREADS", 256, minimum=1)
QUIRE_EVALUATION_TASKS_PER_RUN = env_int("QUIRE_EVALUATION_TASKS_PER_RUN", 2, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO") or "INFO"},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}
