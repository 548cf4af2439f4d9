"""Admission: how many calls a server runs at once, with separate budgets so nobody can starve the work.

gRPC's own `maximum_concurrent_rpcs` counts every call alike, health streams included. The health
service needs no token (probes carry none), and `Watch` streams stay open, so 64 unauthenticated
`Watch` calls would make every later call fail with RESOURCE_EXHAUSTED, `Check` included, and the
orchestrator would restart a healthy server. Here each kind of call has its own budget:

- the Seedcast service's calls (updates, syncs, samples, state): `max_concurrent_rpcs`;
- `Evaluate` streams, which stay open between iterations: `max_evaluate_streams`, a budget of their own, so
  idle streams (64 of them, opened with the token and left) can never refuse an update or a state query;
- health `Watch` streams: `max_health_watches`, a small budget of its own, and each ends after
  `max_watch_seconds` (clients open a new one), so streams opened and left cannot hold it for ever;
- health `Check`: never limited (it answers from memory at once).

A call beyond its budget is answered RESOURCE_EXHAUSTED at once instead of queueing.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

import grpc

HEALTH_CHECK = "/grpc.health.v1.Health/Check"
HEALTH_WATCH = "/grpc.health.v1.Health/Watch"
EVALUATE = "/seedcast.v1.InferenceServer/Evaluate"


class Budget:
    """A count of calls in progress with a ceiling (used from the event loop only: no lock needed)."""

    def __init__(self, name: str, limit: int) -> None:
        self.name, self.limit, self.in_use = name, limit, 0

    def try_take(self) -> bool:
        if self.in_use >= self.limit:
            return False
        self.in_use += 1
        return True

    def give_back(self) -> None:
        self.in_use -= 1


class AdmissionInterceptor(grpc.aio.ServerInterceptor):
    """Wraps every handler so it runs only while its budget has room (see the module docstring)."""

    def __init__(
        self,
        max_concurrent_rpcs: int,
        max_health_watches: int = 8,
        on_reject: Callable[[str], None] = lambda method: None,
        max_evaluate_streams: int = 64,
        max_watch_seconds: float = 60.0,
    ) -> None:
        self.max_watch_seconds = max_watch_seconds
        self.work = Budget("calls", max_concurrent_rpcs)
        self.evaluate_streams = Budget("Evaluate streams", max_evaluate_streams)
        self.watches = Budget("health Watch streams", max_health_watches)
        self._on_reject = on_reject

    async def intercept_service(self, continuation: Callable[..., Awaitable], handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method == HEALTH_CHECK:
            return handler
        budget = {HEALTH_WATCH: self.watches, EVALUATE: self.evaluate_streams}.get(method, self.work)
        seconds = self.max_watch_seconds if method == HEALTH_WATCH else None
        return _admitted(handler, budget, lambda: self._on_reject(method.rsplit("/", 1)[-1]), seconds)


def _admitted(
    handler: grpc.RpcMethodHandler, budget: Budget, on_reject: Callable[[], None], seconds: float | None = None
) -> grpc.RpcMethodHandler:
    """A handler of the same shape as `handler` that first takes a place in `budget`, or refuses; a response
    stream with `seconds` set ends (status OK) after that long, giving its place back."""
    message = f"the server already runs {budget.limit} {budget.name}; retry later"

    async def refuse(context) -> None:
        on_reject()
        await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, message)

    def unary(behavior):
        async def admitted(request, context):
            if not budget.try_take():
                await refuse(context)
            try:
                return await behavior(request, context)
            finally:
                budget.give_back()

        return admitted

    def streaming(behavior):
        async def admitted(request, context):
            if not budget.try_take():
                await refuse(context)
            limit = asyncio.timeout(seconds)
            try:
                async with limit:
                    result = behavior(request, context)
                    if inspect.isasyncgen(result):  # handlers that yield their responses
                        async for response in result:
                            yield response
                    else:  # handlers that write with context.write and return
                        await result
            except TimeoutError:
                if not limit.expired():  # the handler's own timeout, not the stream's time limit
                    raise
                return  # the stream had its time: it ends, and the client opens a new one
            finally:
                budget.give_back()

        return admitted

    options = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary(handler.unary_unary), **options)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(streaming(handler.unary_stream), **options)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(unary(handler.stream_unary), **options)
    return grpc.stream_stream_rpc_method_handler(streaming(handler.stream_stream), **options)
