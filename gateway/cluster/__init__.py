"""Several active nodes on one PostgreSQL database (``database.cluster: true``, docs/scaling.md).

:mod:`gateway.cluster.node` keeps this node registered, beats its heartbeat, takes back the
work of lost nodes and hears of work committed elsewhere; :mod:`gateway.cluster.roles` hands
out what one node at a time may do (a bot's Telegram poller, the scheduler).
"""
