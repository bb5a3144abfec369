"""The sub-agent runner: who may call which sub-agent, on which model, with which checks.

A sub-agent call is one model call (plus at most one repair call) without tools:

- the persona must list the sub-agent under ``subagents:`` and hold its
  ``required_capabilities``;
- its models are tried in order while a provider fails (:class:`ProviderError`); a
  timeout ends the call, because the sub-agent's ``timeout`` covers every attempt;
- a reply that does not match ``output_schema`` is sent back once with the validation
  error; a second invalid reply fails the call.

The daemon builds one runner with :meth:`SubagentRunner.from_settings` and exposes it to
``subagent_invoke`` as ``services.subagents``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gateway.config import ConfigError, Settings
from gateway.config_env import load_env
from gateway.labels import ANY, parse_label
from gateway.runtime.model import ChatMessage, ModelProvider, ModelRequest, ProviderError
from gateway.subagents.base import (
    Behaviour,
    Check,
    Invocation,
    ModelOutcome,
    PathSpace,
    SubagentError,
    SubagentRefusedError,
    SubagentResult,
    SubagentUnavailableError,
)
from gateway.subagents.definitions import SubagentDefinition, load_definitions, model_problem
from gateway.subagents.files import search_files, write_code
from gateway.subagents.memory import groom_memory, retrieve_memory
from gateway.subagents.output import OutputChecker, OutputError, extract_json, schema_instructions
from gateway.subagents.transcript import summarize_thread

if TYPE_CHECKING:
    from gateway.personas import Persona
    from gateway.store.db import Database

__all__ = ["BUILTIN_BEHAVIOURS", "SubagentRunner"]

log = logging.getLogger("talon.subagents")

MAX_INPUT_BYTES = 64 * 1024
# Added to the request timeout so that the runner's own deadline, not the provider's, ends a slow call.
_DEADLINE_SLACK = 5.0
_REPAIR = (
    "Your reply could not be used: {problem}.\n"
    "Reply again with only the corrected JSON object, matching the schema in your instructions."
)

BUILTIN_BEHAVIOURS: Mapping[str, Behaviour] = {
    "session-summarizer": summarize_thread,
    "memory-retriever": retrieve_memory,
    "memory-groomer": groom_memory,
    "file-searcher": search_files,
    "spark-coder": write_code,
}


async def _generic(call: Invocation) -> SubagentResult:
    """A sub-agent without built-in data handling: the input goes to the model as JSON."""
    content = "Input:\n" + json.dumps(call.input, ensure_ascii=False, indent=2)
    outcome = await call.complete(content)
    if outcome.data is None:
        return call.result(outcome.text.strip(), None)
    summary = outcome.data.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        summary = f"{call.definition.name} returned {', '.join(outcome.data) or 'an empty object'}"
    return call.result(summary, outcome.data)


def _holds(labels: Sequence[str], required: str) -> bool:
    """Whether ``labels`` grant ``required`` (same prefix; same scope, or ``*``)."""
    want = parse_label(required)
    if want is None:
        return False
    for label in labels:
        held = parse_label(label)
        if held and held.prefix == want.prefix and held.scope in (want.scope, ANY):
            return True
    return False


class SubagentRunner:
    """Runs sub-agents for personas.

    Args:
        definitions (Mapping[:obj:`str`, :class:`SubagentDefinition`]): Every loaded definition.
        providers (Mapping[:obj:`str`, :class:`~gateway.runtime.model.ModelProvider`]): The
            configured providers by name (the ``<provider>`` part of a model string).
        settings (:class:`~gateway.config.Settings`): The daemon's settings.
        models (Mapping[:obj:`str`, :obj:`str` | Sequence[:obj:`str`]], optional): Model
            overrides by sub-agent name (``subagents.models`` in talon.yaml).
        environ (Mapping[:obj:`str`, :obj:`str`], optional): The environment checked for a
            definition's ``required_env``. Defaults to the process environment plus the
            ``.env`` beside talon.yaml.
        behaviours (Mapping[:obj:`str`, :obj:`Behaviour`], optional): Data handling by
            sub-agent name; defaults to the built-ins'.
    """

    def __init__(
        self,
        definitions: Mapping[str, SubagentDefinition],
        providers: Mapping[str, ModelProvider],
        *,
        settings: Settings,
        models: Mapping[str, str | Sequence[str]] | None = None,
        environ: Mapping[str, str] | None = None,
        behaviours: Mapping[str, Behaviour] | None = None,
    ):
        self.definitions = dict(definitions)
        self.providers = providers
        self.settings = settings
        self._overrides = {
            name: (value,) if isinstance(value, str) else tuple(value)
            for name, value in (models or {}).items()
        }
        self._environ = environ if environ is not None else load_env(settings.config_dir)
        self._behaviours = dict(BUILTIN_BEHAVIOURS if behaviours is None else behaviours)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        providers: Mapping[str, ModelProvider],
        *,
        personas: Mapping[str, Persona] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> SubagentRunner:
        """Load the definitions and the ``subagents`` settings; check them against the config.

        Raises:
            :class:`~gateway.config.ConfigError`: Listing every problem: broken user
            definition files, bad ``subagents.models`` entries, personas listing unknown
            sub-agents.
        """
        definitions = load_definitions(settings.config_dir)
        section = getattr(settings, "subagents", None)
        models = dict(getattr(section, "models", None) or {})
        runner = cls(definitions, providers, settings=settings, models=models, environ=environ)
        problems = runner.config_problems(personas or {})
        if problems:
            raise ConfigError(problems)
        return runner

    # ------------------------------------------------------------ configuration

    def config_problems(self, personas: Mapping[str, Persona]) -> list[str]:
        """Problems in ``subagents.models`` and in the personas' ``subagents:`` lists."""
        problems: list[str] = []
        known = ", ".join(sorted(self.definitions))
        configured = ", ".join(sorted(self.settings.providers)) or "none configured"
        for name, models in self._overrides.items():
            key = f"subagents.models.{name}"
            if name not in self.definitions:
                problems.append(f"{key}: no sub-agent named {name!r}; known: {known}")
            if not models:
                problems.append(f"{key}: give a '<provider>:<model>' or a list of them")
            for model in models:
                problem = model_problem(model)
                if problem:
                    problems.append(f"{key}: {problem}")
                elif model.partition(":")[0] not in self.settings.providers:
                    problems.append(
                        f"{key}: {model!r} uses the provider {model.partition(':')[0]!r}, which is not "
                        f"configured; use one of: {configured}"
                    )
        for persona in personas.values():
            for i, name in enumerate(persona.subagents):
                if name not in self.definitions:
                    problems.append(
                        f"personas/{persona.name}/persona.yaml: subagents[{i}]: no sub-agent named "
                        f"{name!r}; known: {known}"
                    )
        return problems

    def models_for(self, name: str) -> tuple[str, ...]:
        """The model strings ``name`` runs on: the talon.yaml override, else its definition's."""
        return self._overrides.get(name) or self.definitions[name].models

    def _candidates(self, definition: SubagentDefinition) -> list[tuple[str, str]]:
        models = self.models_for(definition.name)
        usable = [
            (provider, model)
            for provider, _, model in (m.partition(":") for m in models)
            if provider in self.providers and model
        ]
        if usable:
            return usable
        configured = ", ".join(sorted(self.providers)) or "none"
        wanted = ", ".join(repr(m) for m in models)
        raise SubagentUnavailableError(
            f"sub-agent {definition.name!r} is unavailable: its model {wanted} needs a provider that is "
            f"not configured in talon.yaml (configured: {configured}); set "
            f"subagents.models.{definition.name} to '<provider>:<model>' with one of your providers"
        )

    def unavailable(self, name: str) -> str | None:
        """Why ``name`` cannot run in this configuration, or ``None`` when it can."""
        try:
            self._check_available(self.definitions[name])
        except SubagentUnavailableError as exc:
            return str(exc)
        return None

    def _check_available(self, definition: SubagentDefinition) -> None:
        missing = [var for var in definition.required_env if not self._environ.get(var)]
        if missing:
            names = ", ".join(missing)
            raise SubagentUnavailableError(
                f"sub-agent {definition.name!r} is unavailable: it requires {names} in the daemon's "
                f"environment (or the .env beside talon.yaml), and it is not set"
            )
        self._candidates(definition)

    def allowed_for(self, persona: Persona) -> list[str]:
        """The sub-agents ``persona`` lists that exist and whose capabilities it holds."""
        return [
            name
            for name in persona.subagents
            if name in self.definitions
            and all(_holds(persona.capabilities, c) for c in self.definitions[name].required_capabilities)
        ]

    # ------------------------------------------------------------ invocation

    def prepare(
        self,
        name: Any,
        input: Any = None,
        *,
        persona: Persona,
        thread_id: int,
        db: Database,
        check_persona: bool = True,
        roots: PathSpace | None = None,
    ) -> Invocation:
        """Check that the call may run and build its :class:`Invocation`.

        Args:
            check_persona (:obj:`bool`, optional): ``False`` for the gateway's own use
                (context summarization), which no persona asked for.
            roots (:class:`PathSpace`, optional): The files the call may read (the calling
                thread's workspace roots); file sub-agents refuse to run without them.

        Raises:
            :class:`SubagentRefusedError`: The persona may not invoke it.
            :class:`SubagentUnavailableError`: It cannot run in this configuration.
            :class:`SubagentError`: Unknown name or bad input.
        """
        definition = self.definitions.get(name) if isinstance(name, str) else None
        if definition is None:
            offered = ", ".join(self.allowed_for(persona)) or "none"
            raise SubagentError(f"unknown sub-agent {name!r}; this persona may invoke: {offered}")
        if check_persona:
            self._check_persona(persona, definition)
        self._check_available(definition)
        if input is None:
            input = {}
        if not isinstance(input, dict):
            raise SubagentError(f"input for {definition.name!r} must be a JSON object")
        size = len(json.dumps(input, ensure_ascii=False, default=str).encode("utf-8"))
        if size > MAX_INPUT_BYTES:
            raise SubagentError(f"input is {size} bytes; the limit is {MAX_INPUT_BYTES}")
        return Invocation(
            definition=definition,
            persona=persona,
            thread_id=thread_id,
            db=db,
            settings=self.settings,
            input=input,
            complete_fn=self._complete,
            roots=roots,
        )

    def _check_persona(self, persona: Persona, definition: SubagentDefinition) -> None:
        if definition.name not in persona.subagents:
            listed = ", ".join(persona.subagents) or "none"
            raise SubagentRefusedError(
                f"persona {persona.name!r} may not invoke the sub-agent {definition.name!r}: it is not "
                f"listed under subagents: in personas/{persona.name}/persona.yaml (listed: {listed})"
            )
        missing = [c for c in definition.required_capabilities if not _holds(persona.capabilities, c)]
        if missing:
            raise SubagentRefusedError(
                f"sub-agent {definition.name!r} needs the capability {', '.join(missing)}, which persona "
                f"{persona.name!r} does not hold"
            )

    async def execute(self, call: Invocation, behaviour: Behaviour | None = None) -> SubagentResult:
        """Run a prepared call within its ``timeout``.

        Args:
            behaviour (:obj:`Behaviour`, optional): Overrides the sub-agent's own handling.

        Raises:
            :class:`SubagentError`: Every model failed, the output stayed invalid, or the
            timeout passed (no further model is tried after a timeout).
        """
        definition = call.definition
        run = behaviour or self._behaviours.get(definition.name, _generic)
        call.deadline = asyncio.get_running_loop().time() + definition.timeout
        try:
            result = await run(call)
        except TimeoutError:
            raise SubagentError(
                f"sub-agent {definition.name!r} did not finish within its timeout of {definition.timeout:g} s"
                + (f" (model {call.usage.model})" if call.usage.model else "")
                + "; no fallback model is tried after a timeout"
            ) from None
        log.info(
            "sub-agent %s for persona %s on thread %s: %d model calls, %d+%d tokens",
            definition.name,
            call.persona.name,
            call.thread_id,
            call.usage.model_calls,
            call.usage.input_tokens,
            call.usage.output_tokens,
        )
        return result

    async def invoke(
        self,
        name: Any,
        input: Any = None,
        *,
        persona: Persona,
        thread_id: int,
        db: Database,
        roots: PathSpace | None = None,
    ) -> SubagentResult:
        """``subagent_invoke``: check, run and return ``{summary, data, usage}``.

        Raises:
            :class:`SubagentError`: With a message for the calling model.
        """
        call = self.prepare(name, input, persona=persona, thread_id=thread_id, db=db, roots=roots)
        return await self.execute(call)

    # ------------------------------------------------------------ the model

    async def _complete(self, call: Invocation, content: str, check: Check | None) -> ModelOutcome:
        definition = call.definition
        system = definition.prompt
        if definition.output_schema is not None:
            system += "\n\n" + schema_instructions(definition.output_schema)
        messages = [ChatMessage("user", content)]
        failures: list[str] = []
        async with asyncio.timeout_at(call.deadline):
            for provider_name, model in self._candidates(definition):
                label = f"{provider_name}:{model}"
                provider = self.providers[provider_name]
                try:
                    response = await provider.complete(self._request(call, model, system, messages))
                except ProviderError as exc:
                    failures.append(f"{label}: {exc}")
                    log.warning(
                        "sub-agent %s: %s failed, trying the next model: %s", definition.name, label, exc
                    )
                    continue
                call.usage.add(response.usage, label)
                return await self._checked(call, provider, model, system, messages, response.text, check)
        raise SubagentError(f"sub-agent {definition.name!r} failed on every model: " + "; ".join(failures))

    def _request(
        self, call: Invocation, model: str, system: str, messages: Sequence[ChatMessage]
    ) -> ModelRequest:
        remaining = max(call.deadline - asyncio.get_running_loop().time(), 0.001)
        return ModelRequest(
            model=model,
            system=system,
            messages=tuple(messages),
            max_tokens=call.definition.max_tokens,
            timeout=remaining + _DEADLINE_SLACK,
        )

    async def _checked(
        self,
        call: Invocation,
        provider: ModelProvider,
        model: str,
        system: str,
        messages: list[ChatMessage],
        text: str,
        check: Check | None,
    ) -> ModelOutcome:
        """Parse and check a reply; on a problem, ask the same model once to repair it."""
        definition = call.definition
        if definition.output_schema is None and check is None:
            return ModelOutcome(text)
        checker = OutputChecker(definition.output_schema) if definition.output_schema is not None else None
        data, problem = _read(text, checker, check)
        if problem is None:
            return ModelOutcome(text, data)
        log.info("sub-agent %s: invalid output (%s); asking for a repair", definition.name, problem)
        repair = [
            *messages,
            ChatMessage("assistant", text if text.strip() else "(empty reply)"),
            ChatMessage("user", _REPAIR.format(problem=problem)),
        ]
        label = f"{provider.name}:{model}"
        try:
            response = await provider.complete(self._request(call, model, system, repair))
        except ProviderError as exc:
            raise SubagentError(
                f"sub-agent {definition.name!r}: its output was invalid ({problem}) and the repair call to "
                f"{label} failed: {exc}"
            ) from None
        call.usage.add(response.usage, label)
        data, second = _read(response.text, checker, check)
        if second is not None:
            raise SubagentError(
                f"sub-agent {definition.name!r} returned output that does not match its output_schema, "
                f"even after one repair attempt: {second}"
            )
        return ModelOutcome(response.text, data)


def _read(text: str, checker: OutputChecker | None, check: Check | None) -> tuple[Any, str | None]:
    try:
        data = extract_json(text)
    except OutputError as exc:
        return None, str(exc)
    problem = checker.problem(data) if checker is not None else None
    if problem is None and check is not None:
        problem = check(data)
    return data, problem
