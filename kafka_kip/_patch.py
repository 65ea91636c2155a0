"""Overrides of kafka-python that subclassing alone cannot express, kept in one named place.

kafka-python's ``KafkaConsumer.__init__`` and ``KafkaProducer.__init__`` build their collaborators
(SubscriptionState, Fetcher, ConsumerCoordinator; RecordAccumulator, Sender) inline, by module-global name,
and those register metrics, listeners and threads while being built, so they cannot be swapped afterwards.
:func:`init_building` runs kafka-python's own ``__init__`` code object, unchanged, with just those names
bound to our subclasses: no code is copied and kafka-python's modules (and every stock client in the
process) are left alone.
"""
from __future__ import annotations

import types
from collections.abc import Callable


def init_building(stock_init: Callable[..., None], **collaborators: type) -> Callable[..., None]:
    """``stock_init`` with each name in ``collaborators`` resolved to the given class instead of kafka-python's.

    Raises ImportError when ``stock_init`` no longer looks those names up (a kafka-python upgrade changed
    how it builds them), so a silent fallback to the stock classes cannot happen.
    """
    missing = set(collaborators) - set(stock_init.__code__.co_names)
    if missing:
        raise ImportError(f'{stock_init.__qualname__} no longer builds {sorted(missing)}; '
                          'kafka_kip must be adapted to this kafka-python version')
    namespace = dict(stock_init.__globals__, **collaborators)
    init = types.FunctionType(stock_init.__code__, namespace, stock_init.__name__, stock_init.__defaults__,
                              stock_init.__closure__)
    init.__kwdefaults__ = stock_init.__kwdefaults__
    return init
