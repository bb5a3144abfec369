"""Schedules: cron and one-shot times, catch-up planning and the ``schedules`` table.

:class:`gateway.scheduler.Scheduler` turns due schedules into queue items; the
``schedule_manage`` tool creates and changes them through :mod:`gateway.scheduling.store`.
"""
