"""The operator console: signed-in users, server-rendered pages under ``/console/``."""
