"""Personas: ``personas/<name>/`` folders loaded into :class:`Persona` objects.

A folder holds ``persona.yaml`` (model, description, capabilities, subagents,
mcp_servers, net_http), ``system.md``, optional ``personality/*.md`` and optional
``prompts/*.md`` (aliases for ``promptFile``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from gateway.budgets import DEFAULT_LIMITS, BudgetLimits
from gateway.config import ConfigError, Settings
from gateway.config_env import env_origins, load_env, substitute_env
from gateway.config_errors import describe_validation, did_you_mean, model_ref_problem, read_yaml
from gateway.interactions.approvals import ApprovalPolicy, ApprovalsFile
from gateway.labels import KNOWN_LABELS, label_problem
from gateway.skills import Skill, catalog
from gateway.voice_settings import SpeechSettings, audio_provider_problem

log = logging.getLogger("talon.personas")

_ALIAS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class _PersonaNetHttp(BaseModel):
    model_config = ConfigDict(extra="forbid")
    allowed_domains: list[str] = Field(
        [], description="domains net_http may reach, added to net_http.allowed_domains of talon.yaml"
    )


class _PersonaWorkspace(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str | None = Field(
        None,
        description="the folder the file tools and the shell see as /shared (a checked-out repository, say); "
        "relative to the persona folder; null = <data_dir>/workspaces/<persona>/shared",
    )
    read_only: bool = Field(
        False, description="true: /shared can be read but not written, by tools and shell"
    )


class _PersonaShell(BaseModel):
    model_config = ConfigDict(extra="forbid")
    network: bool | Literal["guarded"] = Field(
        False,
        description="whether the bash sandbox may reach the network: false (none), true (unrestricted), "
        "guarded (only through an HTTP proxy that applies net_http's allowlists and private-address "
        "blocks; programs that ignore HTTP_PROXY reach nothing)",
    )
    env: dict[str, str] = Field(
        {}, description="variables the bash sandbox sees besides PATH, HOME=/workspace and LANG"
    )


class _PersonaImages(BaseModel):
    model_config = ConfigDict(extra="forbid")
    unattended: bool = Field(
        False,
        description="image_generate and image_edit also run without a person in the chat (schedules, "
        "background jobs, child agents); they make paid calls",
    )


class _PersonaBudgets(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_tool_rounds: int = Field(
        DEFAULT_LIMITS.max_tool_rounds,
        ge=1,
        le=1000,
        description="tool rounds per root run, its child agents included; then the run winds down",
    )
    max_children: int = Field(
        DEFAULT_LIMITS.max_children, ge=0, le=100, description="child agents one root run may start"
    )
    max_tokens: int = Field(
        DEFAULT_LIMITS.max_tokens,
        ge=1000,
        description="tokens in and out of every model call of a root run and its in-process children",
    )
    max_wall_seconds: float = Field(
        DEFAULT_LIMITS.max_wall_seconds,
        gt=0,
        le=86_400,
        description="seconds a root run may take before it winds down (agent.turn_timeout still cuts a turn)",
    )


class PersonaFile(BaseModel):
    """The schema of persona.yaml."""

    model_config = ConfigDict(extra="forbid")
    model: str | list[str] = Field(
        description="`<provider>:<model>`, with a provider from talon.yaml; a list: the first, then the "
        "others in turn when it is overloaded, rate-limited, failing (408, 429, 5xx) or timing out before "
        "any text reached the chat"
    )
    fallbacks: list[str] = Field(
        [],
        description="more `<provider>:<model>` tried after model, the same way (model as a list is the same)",
    )
    role_capabilities: dict[Literal["guest", "member", "admin", "owner"], list[str]] = Field(
        {},
        description="per sender role (a channel's roles), the labels it may use of capabilities: a turn "
        "holds both lists' labels, the narrower scope of each; a role not listed holds all capabilities",
    )
    description: str | None = Field(
        None, description="a note for whoever edits the persona; cards use the first line of system.md"
    )
    capabilities: list[str] = Field([], description="capability labels: the host tools it may use")
    subagents: list[str] = Field([], description="sub-agents it may run with subagent_invoke")
    skills: list[str] = Field(
        [],
        description="skills it may load with the skill tool (folders in skills/ beside talon.yaml, or "
        "packaged); their names and descriptions are in its system prompt and on its card",
    )
    mcp_servers: dict[str, dict[str, Any]] = Field(
        {}, description="MCP servers by name, each stdio (command) or streamable HTTP (url)"
    )
    net_http: _PersonaNetHttp = Field(
        default_factory=_PersonaNetHttp, description="this persona's net_http settings"
    )
    credentials: list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]] = Field(
        [],
        description="environment variables web_request may send as a Bearer token (its credential "
        "argument names one); the value is read at call time and never shown to the model",
    )
    shell: _PersonaShell = Field(default_factory=_PersonaShell, description="this persona's bash sandbox")
    images: _PersonaImages = Field(
        default_factory=_PersonaImages, description="this persona's image_generate and image_edit"
    )
    workspace: _PersonaWorkspace = Field(
        default_factory=_PersonaWorkspace, description="this persona's shared workspace, /shared"
    )
    max_turns: int | None = Field(
        None, ge=1, le=100, description="overrides agent.max_turns; null = that value"
    )
    max_tokens: int | None = Field(None, ge=16, description="overrides agent.max_tokens; null = that value")
    budgets: _PersonaBudgets = Field(
        default_factory=_PersonaBudgets,
        description="limits of one root run; running out winds the run down with a message",
    )
    answerers: Literal["asker", "anyone"] | list[str] = Field(
        "asker",
        description="who may answer ask_question and exit_plan_mode: asker (the person the turn answers), "
        "anyone in the chat, or a list of stable platform user ids",
    )
    approvals: ApprovalsFile | None = Field(
        None,
        description="tool calls that wait for a human's Approve before they run (Deny, or no answer within "
        "timeout, refuses them): {tools: [...] and/or labels: [...], approvers: asker | [user ids], timeout}",
    )
    speech: SpeechSettings | None = Field(
        None,
        description="this persona's spoken replies (its own voice, wherever it answers); "
        "null = the channel's or top-level speech",
    )


@dataclass(frozen=True, slots=True)
class Persona:
    name: str
    provider: str
    model: str
    description: str | None
    capabilities: tuple[str, ...]
    system_prompt: str
    path: Path
    personality: tuple[str, ...] = ()
    subagents: tuple[str, ...] = ()
    skills: tuple[str, ...] = ()
    skill_descriptions: tuple[str, ...] = ()  # one per skill, in the order of skills
    mcp_servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    allowed_domains: tuple[str, ...] = ()
    credentials: tuple[str, ...] = ()  # environment variable names web_request may send as a Bearer token
    shared_path: Path | None = None  # the operator's folder for /shared; None = the default
    shared_read_only: bool = False
    shell_network: bool | str = False  # True, False or "guarded" (shell.network of persona.yaml)
    shell_env: dict[str, str] = field(default_factory=dict)
    images_unattended: bool = False  # images.unattended of persona.yaml
    max_turns: int | None = None
    max_tokens: int | None = None
    budgets: BudgetLimits = DEFAULT_LIMITS
    fallbacks: tuple[str, ...] = ()  # `<provider>:<model>` tried after the first, in order
    role_capabilities: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    role: str | None = None  # the sender role a turn runs as; its capabilities are already narrowed
    answerers: str | tuple[str, ...] = "asker"  # asker | anyone | user ids (ask_question)
    approvals: ApprovalPolicy | None = None  # the calls that wait for a human's approval
    speech: SpeechSettings | None = None  # its own voice; None = the channel's or top-level speech

    @property
    def model_ref(self) -> str:
        """``provider:model``, as ``persona.yaml`` names it."""
        return f"{self.provider}:{self.model}"

    def prompt_alias(self, alias: str) -> Path | None:
        """``prompts/<alias>.md`` when alias is a plain basename that exists, else None."""
        if not _ALIAS.match(alias) or ".." in alias:
            return None
        candidate = self.path / "prompts" / f"{alias.removesuffix('.md')}.md"
        return candidate if candidate.is_file() else None

    def card(self) -> dict[str, Any]:
        """The A2A card: description is the first line of system.md, '#' stripped."""
        first = next((line for line in self.system_prompt.splitlines() if line.strip()), "")
        return {
            "name": self.name,
            "description": first.lstrip("#").strip() or None,
            "skills": [
                {"name": n, "description": d}
                for n, d in zip(self.skills, self.skill_descriptions, strict=True)
            ],
        }


def load_personas(settings: Settings) -> dict[str, Persona]:
    """Load every persona folder; raise ConfigError listing all problems at once."""
    root = settings.personas_path
    problems: list[str] = []
    personas: dict[str, Persona] = {}
    if not root.is_dir():
        raise ConfigError([f"personas_dir: {root} does not exist; create it or run `talon init`"])
    env = load_env(settings.config_dir)
    skills, skill_problems = catalog(settings.config_dir)
    problems += skill_problems
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    for folder in folders:
        persona = _load_one(folder, settings, env, problems, skills)
        if persona:
            personas[persona.name] = persona
    names = [f.name for f in folders]
    for i, binding in enumerate(settings.bindings):
        # A folder that failed to load has its own problem above; its bindings add none.
        if binding.persona not in names:
            guess = did_you_mean(binding.persona, names)
            problems.append(
                f"bindings[{i}].persona: no persona named {binding.persona!r} in {root}; "
                + (f"did you mean {guess!r}? " if guess else "")
                + f"create personas/{binding.persona}/ or use one of {', '.join(names) or '(none yet)'}"
            )
    if problems:
        raise ConfigError(problems)
    return personas


def _key_path(loc: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".") or "(top level)"


def _load_one(
    folder: Path, settings: Settings, env: dict[str, str], problems: list[str], skills: Mapping[str, Skill]
) -> Persona | None:
    where = f"personas/{folder.name}"
    spec_file = folder / "persona.yaml"
    if not spec_file.is_file():
        problems.append(f"{where}/persona.yaml: missing; every persona folder needs one")
        return None
    try:
        raw = read_yaml(spec_file, f"{where}/persona.yaml") or {}
    except ConfigError as exc:
        problems += exc.problems
        return None
    missing: dict[str, str] = {}
    used: dict[str, str] = {}
    raw = substitute_env(raw, env, missing, used)
    origins = env_origins(used, settings.config_dir)
    try:
        spec = PersonaFile.model_validate(raw)
    except ValidationError as exc:
        shown = describe_validation(exc, PersonaFile, where=_key_path, origins=origins)
        problems += [f"{where}/persona.yaml: {p}" for p in shown]
        return None
    refs = [spec.model] if isinstance(spec.model, str) else list(spec.model)
    refs += spec.fallbacks
    if not refs:
        problems.append(f"{where}/persona.yaml: model: an empty list; name at least one '<provider>:<model>'")
        return None
    wrong = [
        (i, why)
        for i, ref in enumerate(refs)
        if (why := model_ref_problem(ref, list(settings.providers), origins.get("model"))) is not None
    ]
    for i, why in wrong:
        problems.append(f"{where}/persona.yaml: {_model_key(spec, i)}: {why}")
    if wrong:
        return None
    provider, _, model = refs[0].partition(":")
    prov = settings.providers[provider]
    if prov.type == "anthropic" and not prov.api_key:
        # Not fatal: the daemon (and every other persona) still runs; this persona's turns
        # fail with the same message until the key is set.
        var = "ANTHROPIC_API_KEY" if provider == "anthropic" else f"the key for {provider}"
        log.warning(
            "providers.%s.api_key: empty, but %s uses it; set %s in .env or point the persona at another "
            "provider",
            provider,
            where,
            var,
        )
    for i, label in enumerate(spec.capabilities):
        why = label_problem(label)
        if why:
            problems.append(f"{where}/persona.yaml: capabilities[{i}]: {why}")
    for role, labels in spec.role_capabilities.items():
        for i, label in enumerate(labels):
            why = label_problem(label)
            if why:
                problems.append(f"{where}/persona.yaml: role_capabilities.{role}[{i}]: {why}")
    for i, label in enumerate(spec.approvals.labels if spec.approvals else ()):
        why = None if label.split(":", 1)[0] in KNOWN_LABELS else label_problem(label)  # a prefix is enough
        if why:
            problems.append(f"{where}/persona.yaml: approvals.labels[{i}]: {why}")
    for i, skill in enumerate(spec.skills):
        if skill not in skills:
            problems.append(
                f"{where}/persona.yaml: skills[{i}]: no skill named {skill!r}; found: "
                f"{', '.join(sorted(skills)) or 'none'} (skills/<name>/SKILL.md beside talon.yaml, or packaged)"
            )
    if spec.speech is not None and spec.speech.provider:
        types = {name: prov.type for name, prov in settings.providers.items()}
        if (why := audio_provider_problem("speech", spec.speech.provider, types)) is not None:
            problems.append(f"{where}/persona.yaml: {why}")
    if spec.workspace.path and not (folder / spec.workspace.path).is_dir():
        problems.append(
            f"{where}/persona.yaml: workspace.path: {(folder / spec.workspace.path)} is not a folder; "
            "create it, or remove the key to use <data_dir>/workspaces/<persona>/shared"
        )
    from gateway.persona_mcp.settings import mcp_server_problems

    problems += mcp_server_problems(folder.name, spec.mcp_servers)
    system_file = folder / "system.md"
    if not system_file.is_file():
        problems.append(f"{where}/system.md: missing; write the persona's system prompt there")
        return None
    personality = tuple(
        p.read_text(encoding="utf-8").strip() for p in sorted((folder / "personality").glob("*.md"))
    )
    return Persona(
        name=folder.name,
        provider=provider,
        model=model,
        description=spec.description,
        capabilities=tuple(spec.capabilities),
        system_prompt=system_file.read_text(encoding="utf-8").strip(),
        path=folder,
        personality=tuple(p for p in personality if p),
        subagents=tuple(spec.subagents),
        skills=tuple(spec.skills),
        skill_descriptions=tuple(skills[s].description if s in skills else "" for s in spec.skills),
        mcp_servers=spec.mcp_servers,
        allowed_domains=tuple(spec.net_http.allowed_domains),
        credentials=tuple(dict.fromkeys(spec.credentials)),
        shared_path=(folder / spec.workspace.path).resolve() if spec.workspace.path else None,
        shared_read_only=spec.workspace.read_only,
        shell_network=spec.shell.network,
        shell_env=dict(spec.shell.env),
        images_unattended=spec.images.unattended,
        max_turns=spec.max_turns,
        max_tokens=spec.max_tokens,
        budgets=BudgetLimits(**spec.budgets.model_dump()),
        fallbacks=tuple(dict.fromkeys(r for r in refs[1:] if r != refs[0])),
        role_capabilities={role: tuple(labels) for role, labels in spec.role_capabilities.items()},
        answerers=spec.answerers if isinstance(spec.answerers, str) else tuple(spec.answerers),
        approvals=ApprovalPolicy.from_file(spec.approvals),
        speech=spec.speech,
    )


def _model_key(spec: PersonaFile, index: int) -> str:
    """The key path of the ``index``-th model reference (``model``, ``model[1]``, ``fallbacks[0]``)."""
    listed = 1 if isinstance(spec.model, str) else len(spec.model)
    if index >= listed:
        return f"fallbacks[{index - listed}]"
    return "model" if isinstance(spec.model, str) else f"model[{index}]"
