"""Settings of the Django example project: the database comes from the PG* environment (pg_virtualenv sets it)."""
import sys
import os

SECRET_KEY = "counters-test-only"
INSTALLED_APPS = ["django_counters", "blog", "forum"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("PGDATABASE", "postgres"),
        "USER": os.environ.get("PGUSER", "postgres"),
        "PASSWORD": os.environ.get("PGPASSWORD", ""),
        "HOST": os.environ.get("PGHOST", ""),
        "PORT": os.environ.get("PGPORT", ""),
    }
}
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# COUNTERS_NO_MIGRATIONS=1: the apps are made without their migrations (as a test run with MIGRATE = False):
# django-counters declares their counters once their tables exist.
if os.environ.get("COUNTERS_NO_MIGRATIONS"):
    MIGRATION_MODULES = {"forum": None}
# django-counters from this repository (packages/django-counters), as pip install would put it on the path.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "packages", "django-counters"))
