#!/usr/bin/env python3
"""The Django example project's entry point: /usr/bin/python3 manage.py test (see test/scripts/django.sh)."""
import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
