"""runs' usage: totals for budgets and /usage, breakdowns for `talon usage`, fallbacks for
`talon status`, and budget notices sent once."""

from __future__ import annotations

from connectors.base import ThreadKey
from tests.unit.store.contract.conftest import Backend


async def _run(
    store: Backend,
    thread_id: int,
    *,
    persona: str = "p",
    started: float,
    tokens: tuple[int, int] = (100, 50),
    cost: float | None = 0.5,
    sender: str | None = "ann",
    channel: str | None = "tg",
    model: str = "fake:big",
    fallbacks: int = 0,
) -> int:
    run_id = await store.write(store.runs.start_run, thread_id, persona, "fake:big", started)
    spend = store.runs.RunSpend(
        cost=cost, currency="USD", sender_id=sender, channel=channel, fallbacks=fallbacks
    )
    await store.write(
        store.runs.complete_run,
        run_id,
        model=model,
        input_tokens=tokens[0],
        output_tokens=tokens[1],
        model_calls=1,
        now=started + 1,
        spend=spend,
    )
    return run_id


async def _thread(store: Backend, chat: str = "chat") -> int:
    row = await store.write(
        store.threads.upsert_thread, ThreadKey("tg", chat), chat_type="group", persona="p", now=1.0
    )
    return row.id


async def test_totals_count_the_runs_since_a_moment_by_each_filter(store: Backend) -> None:
    one, two = await _thread(store, "a"), await _thread(store, "b")
    await _run(store, one, started=100.0)
    await _run(store, one, started=200.0, sender="bob", cost=None)
    await _run(store, two, started=300.0, persona="q", channel="slack")
    totals = store.usage.usage_totals

    everything = await store.read(totals, since=0.0)
    assert (everything.tokens, everything.cost, everything.runs, everything.unpriced) == (450, 1.0, 3, 1)
    assert (await store.read(totals, since=150.0)).runs == 2
    assert (await store.read(totals, since=0.0, sender_id="ann")).tokens == 300
    assert (await store.read(totals, since=0.0, persona="q")).cost == 0.5
    assert (await store.read(totals, since=0.0, channel="slack")).runs == 1
    assert (await store.read(totals, since=0.0, thread_id=one)).runs == 2
    assert (await store.read(totals, since=1000.0)).tokens == 0


async def test_usage_by_groups_costliest_first(store: Backend) -> None:
    thread_id = await _thread(store)
    await _run(store, thread_id, started=10.0, sender="ann", cost=0.1)
    await _run(store, thread_id, started=20.0, sender="bob", cost=2.0)
    await _run(store, thread_id, started=30.0, sender="bob", cost=1.0)
    rows = await store.read(store.usage.usage_by, "user", since=0.0)
    assert [(r.key, r.runs, r.input_tokens, r.output_tokens, r.cost) for r in rows] == [
        ("bob", 2, 200, 100, 3.0),
        ("ann", 1, 100, 50, 0.1),
    ]
    assert [r.key for r in await store.read(store.usage.usage_by, "persona", since=0.0)] == ["p"]


async def test_fallbacks_per_persona_name_the_last_model_that_answered(store: Backend) -> None:
    thread_id = await _thread(store)
    await _run(store, thread_id, started=10.0, fallbacks=2, model="fake:small")
    await _run(store, thread_id, started=20.0, fallbacks=1, model="fake:tiny")
    await _run(store, thread_id, started=30.0)
    (count,) = await store.read(store.usage.fallback_counts, since=0.0)
    assert (count.persona, count.runs, count.fallbacks, count.last_model) == ("p", 2, 3, "fake:tiny")
    assert await store.read(store.usage.fallback_counts, since=25.0) == []


async def test_a_budget_notice_is_marked_once_per_period(store: Backend) -> None:
    mark = store.usage.mark_notice
    assert await store.write(mark, "per_user_day", "ann", "2026-12-01", 1.0)
    assert not await store.write(mark, "per_user_day", "ann", "2026-12-01", 2.0)
    assert await store.write(mark, "per_user_day", "ann", "2026-12-02", 3.0)
    assert await store.write(mark, "per_user_day", "bob", "2026-12-01", 4.0)


async def test_completed_runs_add_to_the_rollups_of_their_user_persona_and_channel(store: Backend) -> None:
    thread_id = await _thread(store)

    async def run(sender: str | None, cost: float | None, periods: tuple[str, ...]) -> None:
        run_id = await store.write(store.runs.start_run, thread_id, "p", "fake:big", 1.0)
        spend = store.runs.RunSpend(cost=cost, sender_id=sender, channel="tg", persona="p", periods=periods)
        await store.write(
            store.runs.complete_run, run_id, model="fake:big", input_tokens=100, output_tokens=50,
            model_calls=1, now=2.0, spend=spend,
        )  # fmt: skip

    await run("ann", 0.25, ("2026-12-01", "2026-12"))
    await run("ann", None, ("2026-12-01", "2026-12"))
    await run("bob", 1.0, ("2026-12-02", "2026-12"))
    await run("ann", 9.0, ())  # no periods: no rollups (a run priced outside a turn)
    got = await store.read(
        store.usage.rollup_totals,
        [
            ("user", "ann", "2026-12-01"),
            ("user", "bob", "2026-12"),
            ("persona", "p", "2026-12"),
            ("channel", "tg", "2026-12-02"),
            ("user", "carl", "2026-12"),
        ],
    )
    assert [(t.tokens, t.cost, t.runs, t.unpriced) for t in got] == [
        (300, 0.25, 2, 1),
        (150, 1.0, 1, 0),
        (450, 1.25, 3, 1),
        (150, 1.0, 1, 0),
        (0, 0.0, 0, 0),
    ]
