"""How every harness here starts: the project on sys.path, its settings, and
DEBUG off as in production (with DEBUG on, Django records every SQL
statement it runs). Import it before anything that needs Django:

    import django_setup  # noqa: F401  (sets Django up)
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("DEBUG", "false")
os.environ.setdefault("SECRET_KEY", "benchmarks-only")

import django  # noqa: E402 - after the settings module is named

django.setup()
