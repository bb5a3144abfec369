"""Schedules: cron and one-shot times and catch-up planning.

:class:`gateway.scheduler.Scheduler` turns due schedules into queue items; the
``schedule_manage`` tool creates and changes them; both keep them in
:mod:`gateway.store.schedules`.
"""
