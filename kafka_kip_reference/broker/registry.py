"""The one registry of the reference brokers' API handlers.

Each handler declares beside itself the API key and the versions it handles::

    @handles(ApiKey.ListOffsets, 1, 10)
    async def handle_list_offsets(request, ctx: RequestContext): ...

Registering a key twice raises :class:`DuplicateHandlerError` while the module is imported.
:mod:`kafka_kip_reference.broker.apis` imports every handler module; its ``HANDLERS`` is the complete table.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_kip.protocol.messages import REQUESTS

if TYPE_CHECKING:
    from kafka_kip_reference.broker.context import RequestContext

Handler = Callable[[Any, 'RequestContext'], Awaitable[Any]]


class DuplicateHandlerError(RuntimeError):
    """Two handlers claim one API key."""


@dataclass(frozen=True)
class ApiHandler:
    """A handler and what it handles: ``api_key`` at versions ``min_version..max_version``.

    ``advertised_min_version`` is what ApiVersions names as the minimum when Kafka advertises versions it no
    longer serves (Produce v0-v2, KAFKA-18659); requests at those versions close the connection, as on Kafka.
    """

    api_key: int
    min_version: int
    max_version: int
    handle: Handler
    advertised_min_version: int

    @property
    def versions(self) -> tuple[int, int]:
        """The versions advertised in ApiVersions."""
        return self.advertised_min_version, self.max_version

    def handles(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


class HandlerRegistry:
    """``api_key -> ApiHandler``, filled by :func:`handles` as handler modules are imported."""

    def __init__(self) -> None:
        self._handlers: dict[int, ApiHandler] = {}

    def register(self, api_key: int, min_version: int, max_version: int, handle: Handler,
                 advertised_min_version: int | None = None) -> None:
        api_key = int(api_key)
        if api_key in self._handlers:
            raise DuplicateHandlerError(f'api key {api_key} is handled twice: by '
                                        f'{_name(self._handlers[api_key].handle)} and by {_name(handle)}')
        request_class = REQUESTS.get(api_key)
        if request_class is None:
            raise ValueError(f'{_name(handle)}: api key {api_key} has no request class')
        if not request_class.min_version <= min_version <= max_version <= request_class.max_version:
            raise ValueError(f'{_name(handle)}: versions {min_version}-{max_version} of api {api_key} are not all '
                             f'known to its message classes ({request_class.min_version}-'
                             f'{request_class.max_version})')
        advertised = min_version if advertised_min_version is None else advertised_min_version
        if advertised > min_version:
            raise ValueError(f'{_name(handle)}: advertised minimum {advertised} above the handled minimum {min_version}')
        self._handlers[api_key] = ApiHandler(api_key, min_version, max_version, handle, advertised)

    def get(self, api_key: int) -> ApiHandler | None:
        return self._handlers.get(api_key)

    def __getitem__(self, api_key: int) -> ApiHandler:
        return self._handlers[api_key]

    def __contains__(self, api_key: object) -> bool:
        return api_key in self._handlers

    def __iter__(self) -> Iterator[int]:
        return iter(sorted(self._handlers))

    def versions(self) -> dict[int, tuple[int, int]]:
        """``{api_key: (min, max)}`` advertised for every handler, by key."""
        return {key: self._handlers[key].versions for key in sorted(self._handlers)}


#: The registry every handler module registers in.
HANDLERS = HandlerRegistry()


def handles(api_key: int, min_version: int, max_version: int, *,
            advertised_min_version: int | None = None) -> Callable[[Handler], Handler]:
    """Register the decorated coroutine as the handler of ``api_key`` versions ``min_version..max_version``."""
    def register(handle: Handler) -> Handler:
        HANDLERS.register(api_key, min_version, max_version, handle, advertised_min_version)
        return handle
    return register


def _name(handle: Handler) -> str:
    return f'{handle.__module__}.{getattr(handle, "__qualname__", handle)}'
