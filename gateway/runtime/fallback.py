"""Model fallback: a persona's models tried in turn when one is unavailable.

A persona's ``model`` may be a list (or ``model`` plus ``fallbacks``). :class:`ModelChain`
is the provider its turn talks to: every model call starts with the first model and moves
to the next only when the call failed with :attr:`ProviderError.fallback` set: 408, 429, 5xx,
Anthropic's 529 overloaded, no response, or a timeout, each after the provider's own retries
and only before any text of the reply was streamed (a shown reply is never answered twice).
A refused request or key (400, 401, 403, 404, 413, 422) fails the call at once, so a broken
key is never hidden behind another model. Each fallback is logged and put in the run's trace;
the chain remembers which model answered, for the run's row.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gateway.runtime.model import ModelProvider, ModelRequest, ModelResponse, ProviderError, TextDelta
from gateway.tracing import NULL_TRACE, RunTrace

__all__ = ["ModelChain", "ModelChoice", "chain_for"]

log = logging.getLogger("talon.fallback")


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """One model of a chain: ``provider:model`` and the provider that serves it."""

    ref: str
    provider: ModelProvider
    model: str


class ModelChain:
    """A :class:`~gateway.runtime.model.ModelProvider` over several models, first to last.

    Attributes:
        answered (:obj:`str` | :obj:`None`): ``provider:model`` of the last call that succeeded.
        fallbacks (:obj:`int`): Calls a later model answered because an earlier one was unavailable.
    """

    def __init__(self, choices: Sequence[ModelChoice], *, trace: RunTrace = NULL_TRACE):
        if not choices:
            raise ValueError("a model chain needs at least one model")
        self.choices = tuple(choices)
        self.name = choices[0].provider.name
        self.trace = trace
        self.answered: str | None = None
        self.fallbacks = 0

    async def complete(self, request: ModelRequest, on_text: TextDelta | None = None) -> ModelResponse:
        """Ask each model in turn until one answers.

        Raises:
            :class:`ProviderError`: The last model's error, or the first error that is not a
                reason to try another model.
        """
        last = len(self.choices) - 1
        for index, choice in enumerate(self.choices):
            try:
                response = await choice.provider.complete(
                    dataclasses.replace(request, model=choice.model), on_text
                )
            except ProviderError as exc:
                if not exc.fallback or index == last:
                    raise
                following = self.choices[index + 1].ref
                log.warning("model %s unavailable (%s); trying %s", choice.ref, exc, following)
                self.trace.phase(
                    "model_fallback", error_class="unavailable", failed=choice.ref, next=following
                )
                continue
            if index > 0:
                self.fallbacks += 1
            self.answered = choice.ref
            return dataclasses.replace(response, model=choice.model) if index > 0 else response
        raise AssertionError("unreachable: the last model's error is raised")

    async def aclose(self) -> None:
        return None  # the providers belong to the daemon


def chain_for(
    providers: Mapping[str, ModelProvider],
    first: str,
    fallbacks: Sequence[str],
    *,
    trace: RunTrace = NULL_TRACE,
) -> ModelChain:
    """The chain of ``first`` then ``fallbacks`` (``provider:model`` each, checked at load)."""
    choices = []
    for ref in (first, *fallbacks):
        provider, _, model = ref.partition(":")
        choices.append(ModelChoice(ref, providers[provider], model))
    return ModelChain(choices, trace=trace)
