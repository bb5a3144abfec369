"""Child agents: the ``agent`` tool's foreground and background children and ``compose`` graphs.

- :mod:`.plan`: what a child runs with (:class:`~.plan.ChildPlan`) and returns;
- :mod:`.service`: :class:`~.service.Children`, which runs them;
- :mod:`.compose`: the dependency-graph scheduler of ``compose``;
- :mod:`.jobs`: background children's cancel, health, steering and progress.
"""
