"""Definitions shipped with Talon: the built-in sub-agents in ``subagents/*.md``.

Each file is Markdown with YAML front matter (name, description, model, max_tokens,
timeout, required_capabilities, optional output_schema); the body is the sub-agent's
prompt. :mod:`gateway.subagents.definitions` loads them.
"""
