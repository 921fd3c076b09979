"""What a ``_delegate`` call's executor (``llm/delegate.py``) asks of the agent it runs
under, declared here: ``llm/agent.py`` imports the delegate module, so the delegate module
names no class of it.  :class:`~sophon_dsl.llm.agent.Agent` implements
:class:`DelegateParent`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from ..tools import ToolRegistry

if TYPE_CHECKING:  # (named in annotations only)
    from .provider import Provider

__all__ = ["DelegateParent", "DelegateResult", "SubAgent"]


class DelegateResult(Protocol):
    """How a delegate's sub-agent ended: its final output, status, turns and error."""

    @property
    def status(self) -> str: ...

    @property
    def output(self) -> Any: ...

    @property
    def turns(self) -> Sequence[Any]: ...

    @property
    def error(self) -> str | None: ...


class SubAgent(Protocol):
    """A delegate's sub-agent: run once on the delegate's request."""

    async def arun(self, request: str, *, input: Any = None, state: Any = None) -> DelegateResult: ...


class DelegateParent(Protocol):
    """The agent whose plan has ``_delegate`` calls: the saved delegate requests it was given
    and where they live, how deep delegates may nest, its tools, provider and model (the
    sub-agent's defaults), and the sub-agent it makes for one delegate call."""

    @property
    def delegates(self) -> dict: ...

    @property
    def delegate_dir(self) -> str | Path | None: ...

    @property
    def max_delegate_depth(self) -> int: ...

    @property
    def registry(self) -> ToolRegistry: ...

    @property
    def provider(self) -> Provider: ...

    @property
    def model(self) -> str | None: ...

    def delegate_agent(self, provider: Provider, tools: ToolRegistry, config: dict, *, model: str | None,
                       output_schema: Any, state_schema: Any, depth: int) -> SubAgent: ...
