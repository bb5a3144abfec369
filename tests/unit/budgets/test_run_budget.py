"""RunBudget: what it counts, when it runs out, and the persona.yaml setting behind it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.budgets import DEFAULT_LIMITS, BudgetLimits, ChildBudgetError, RunBudget
from gateway.config import ConfigError, load_settings
from gateway.errors import RefusedError
from gateway.personas import load_personas
from gateway.runtime.model import Usage


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_fresh_budget_has_nothing_exhausted() -> None:
    assert RunBudget().exhausted() is None


def test_tool_rounds_run_out_at_the_limit() -> None:
    budget = RunBudget(BudgetLimits(max_tool_rounds=2))
    budget.round_done()
    assert budget.exhausted() is None
    budget.round_done()
    spent = budget.exhausted()
    assert spent is not None and spent.name == "max_tool_rounds"
    assert "2 tool rounds" in spent.system_note() and "2 tool rounds" in spent.user_notice()


def test_tokens_in_and_out_count_against_max_tokens() -> None:
    budget = RunBudget(BudgetLimits(max_tokens=1000))
    budget.charge(Usage(400, 99))
    assert budget.exhausted() is None and budget.tokens == 499
    budget.charge(Usage(400, 101))  # a child's call charges the same budget
    spent = budget.exhausted()
    assert spent is not None and spent.name == "max_tokens" and spent.used == 1000


def test_negative_usage_from_a_provider_is_not_credited() -> None:
    budget = RunBudget(BudgetLimits(max_tokens=1000))
    budget.charge(Usage(-5000, -5000))
    assert budget.tokens == 0


def test_wall_time_runs_out_by_the_clock() -> None:
    clock = _Clock()
    budget = RunBudget(BudgetLimits(max_wall_seconds=30), clock=clock)
    clock.now += 29.9
    assert budget.exhausted() is None
    clock.now += 0.2
    spent = budget.exhausted()
    assert spent is not None and spent.name == "max_wall_seconds" and "30 seconds" in spent.user_notice()


def test_admit_child_refuses_past_max_children_with_a_message_the_model_can_act_on() -> None:
    budget = RunBudget(BudgetLimits(max_children=2))
    budget.admit_child()
    budget.admit_child()
    with pytest.raises(ChildBudgetError) as caught:
        budget.admit_child()
    assert isinstance(caught.value, RefusedError)
    assert "max_children 2" in str(caught.value) and "yourself" in str(caught.value)
    assert budget.children == 2  # a refused child is not counted


def _persona_dir(tmp_path: Path, persona_yaml: str) -> Path:
    (tmp_path / "talon.yaml").write_text(
        "providers:\n  local: {type: openai, base_url: 'http://127.0.0.1:1/v1', api_key: none}\n"
    )
    folder = tmp_path / "personas" / "p"
    folder.mkdir(parents=True)
    (folder / "persona.yaml").write_text(persona_yaml)
    (folder / "system.md").write_text("# P\n")
    return tmp_path / "talon.yaml"


def test_persona_yaml_budgets_default_and_override(tmp_path: Path) -> None:
    config = _persona_dir(tmp_path, "model: local:m\nbudgets: {max_tool_rounds: 3, max_wall_seconds: 60}\n")
    persona = load_personas(load_settings(config))["p"]
    assert persona.budgets == BudgetLimits(
        max_tool_rounds=3,
        max_children=DEFAULT_LIMITS.max_children,
        max_tokens=DEFAULT_LIMITS.max_tokens,
        max_wall_seconds=60,
    )


def test_persona_yaml_budget_problems_name_the_key(tmp_path: Path) -> None:
    config = _persona_dir(tmp_path, "model: local:m\nbudgets: {max_tool_rounds: 0, max_rounds: 3}\n")
    with pytest.raises(ConfigError) as caught:
        load_personas(load_settings(config))
    text = str(caught.value)
    assert "budgets.max_tool_rounds" in text and "budgets.max_rounds" in text
