"""LiteLLM's Router choosing its deployments by repute
(``pip install repute[litellm]``)::

    repute.litellm.register(pool, router, kind="openai")
    litellm.callbacks = [repute.litellm.Logger(pool, kind="openai")]

A deployment is the resource whose value is its ``model_info.id``, labelled
with its model group (``model_name``) under ``label``: the id is unique per
deployment, LiteLLM names it in every routing and logging hook, it is no
secret (a value appears in events and errors, an ``api_key`` must not),
and it stays the same across restarts when the model list sets it. The
deployment keeps its own ``api_key``: LiteLLM sends it, repute never holds it.

Each call of the router is one request of the host's attempt protocol,
keyed by LiteLLM's ``litellm_trace_id``, which LiteLLM makes per call and
keeps across that call's retries (``litellm_call_id`` is new per attempt
and not known when the deployment is chosen): ``async_filter_deployments``
leases a deployment of the asked model group (the context) and narrows the
candidates to it; each retry of LiteLLM filters again and leases another,
the ones this call tried excluded (a caller passing its own
``litellm_trace_id`` gives each concurrent call its own). Once the protocol
says the call itself is at fault (the same error on two deployments),
LiteLLM's further retries of it are its own, counted against no deployment.
``async_log_success_event`` and
``async_log_failure_event`` tell the protocol the answer (the status, the
headers and the error body the exception carries, or a transport failure)
and so report and release. Only the Router's async calls (``acompletion``,
``aembedding``, ...) run ``async_filter_deployments``: a sync call is left
to LiteLLM's own choice and not followed. Router cooldowns are best turned off
(``disable_cooldowns=True``): repute's cells already keep a deployment
that failed out of the choice, for as long as its answer said.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from litellm.exceptions import APIConnectionError, Timeout
from litellm.integrations.custom_logger import CustomLogger

from ._adapt import Where, invalid, native
from ._aio import AsyncPool
from ._await import Acquirer
from ._native import Pool, _Attempts, _Plan

if TYPE_CHECKING:
    from litellm.router import Router

__all__ = ["Logger", "register"]

#: The label naming a deployment's model group when the caller names none.
DEFAULT_LABEL = "model_group"
#: Calls whose attempts are kept between LiteLLM's retries when the caller
#: names no bound; the oldest are ended first.
DEFAULT_MAX_CALLS = 4096
#: Leases of deployments LiteLLM keeps out, passed over in one filter call
#: before LiteLLM is left to choose that attempt itself.
_MAX_PASSED = 16
#: Seconds a call is followed after its last event: LiteLLM tells no logger
#: that it stopped retrying, so a call silent this long is ended (a result
#: held back for a second opinion is then reported as its profile reads it).
_LINGER = 60.0


def _deployments(router: Router | Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    registry = getattr(router, "registry", None)
    listed = registry().all() if callable(registry) else router
    return list(listed)


def register(
    pool: Pool | AsyncPool,
    router: Router | Iterable[Mapping[str, Any]],
    *,
    kind: str,
    label: str = DEFAULT_LABEL,
) -> list[str]:
    """Registers each deployment of ``router`` (a ``litellm.Router`` or its
    model list) in ``pool`` as a ``kind`` resource: its ``model_info.id``
    the value, its model group the ``label``, its ``rpm``/``tpm`` the
    resource's. The ids registered; ones already there are left as they are."""
    target = native(pool)
    if not isinstance(label, str) or not label:
        raise invalid("label", "must be a non-empty str")
    ids = []
    for deployment in _deployments(router):
        info = deployment.get("model_info") or {}
        id, group = info.get("id"), deployment.get("model_name")
        if not isinstance(id, str) or not id:
            raise invalid("model_info.id", "every deployment must have one (a Router gives each one)")
        if not isinstance(group, str) or not group:
            raise invalid("model_name", "every deployment must have one")
        params = deployment.get("litellm_params") or {}
        rpm, tpm = params.get("rpm"), params.get("tpm")
        target.register(
            kind,
            id,
            labels={label: group},
            rpm=rpm if isinstance(rpm, int) else None,
            tpm=tpm if isinstance(tpm, int) else None,
        )
        ids.append(id)
    return ids


class _Call:
    """One router call's attempts, the deployment leased for the one in
    flight, and whether the protocol has said the call is done."""

    def __init__(self, attempts: _Attempts, group: str) -> None:
        self.attempts = attempts
        self.group = group
        self.leased: str | None = None
        self.done = False
        self.seen = time.monotonic()


def _metadata(kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    params = kwargs.get("litellm_params") or {}
    metadata = params.get("metadata") or kwargs.get("metadata") or {}
    return metadata if isinstance(metadata, Mapping) else {}


def _deployment_id(kwargs: Mapping[str, Any]) -> str | None:
    info = _metadata(kwargs).get("model_info") or {}
    id = kwargs.get("model_id") or (info.get("id") if isinstance(info, Mapping) else None)
    return id if isinstance(id, str) else None


def _last_try(kwargs: Mapping[str, Any]) -> bool:
    """Whether LiteLLM retries no more in this model group after this attempt."""
    metadata = _metadata(kwargs)
    tried, most = metadata.get("attempted_retries"), metadata.get("max_retries")
    return isinstance(tried, int) and isinstance(most, int) and tried >= most


def _failure(error: BaseException) -> str | None:
    """The transport failure an exception without an answer stands for;
    None: it is not the deployment's (raised before anything was sent)."""
    if isinstance(error, Timeout):
        return "timeout"
    if isinstance(error, APIConnectionError):
        return "connection_reset"
    return None


def _answer(error: BaseException) -> tuple[int, list[tuple[str, str]], str | None] | None:
    """The status, headers and error body of the provider's answer an
    exception carries; None when there was no answer."""
    status = getattr(error, "status_code", None)
    response = getattr(error, "response", None)
    if not isinstance(status, int) or status < 400 or response is None or getattr(response, "status_code", 0) < 400:
        return None
    headers: Any = getattr(response, "headers", None)
    pairs = list(headers.multi_items()) if hasattr(headers, "multi_items") else []
    try:
        body = response.text
    except Exception:  # a response LiteLLM built without a readable body
        body = None
    return status, pairs, body if isinstance(body, str) else None


class Logger(CustomLogger):
    """A LiteLLM ``CustomLogger`` that has the Router send each attempt on
    the deployment repute leases among ``pool``'s ``kind`` resources whose
    labels match ``where`` (and whose ``label`` is the asked model group),
    and reports each attempt's answer. ``context``: the context every call
    counts in (default: the model group). ``attempts`` and ``timeout``
    bound a call as the protocol does; LiteLLM's own ``num_retries`` bounds
    it too. At most ``max_calls`` calls are followed between retries."""

    def __init__(
        self,
        pool: Pool | AsyncPool,
        *,
        kind: str | None = None,
        where: Where | None = None,
        context: str | None = None,
        label: str = DEFAULT_LABEL,
        attempts: int = 16,
        timeout: float | None = None,
        max_calls: int = DEFAULT_MAX_CALLS,
    ) -> None:
        super().__init__()
        self._pool = native(pool)
        if kind is not None and not isinstance(kind, str):
            raise invalid("kind", "must be a str or None")
        if context is not None and not isinstance(context, str):
            raise invalid("context", "must be a str or None")
        if not isinstance(label, str) or not label:
            raise invalid("label", "must be a non-empty str")
        if where is not None and label in where:
            raise invalid("where", "must not name the model group's label, which each call sets")
        if isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1:
            raise invalid("max_calls", "must be an int >= 1")
        self._kind, self._where, self._context, self._label = kind, dict(where or {}), context, label
        self._attempts, self._timeout, self._max_calls = attempts, timeout, max_calls
        self._acquirer = Acquirer(pool, self._pool)
        self._calls: OrderedDict[str, _Call] = OrderedDict()
        self._lock = threading.Lock()
        self._start("check")  # the host checks attempts, timeout and where as for a call

    def _start(self, group: str) -> _Attempts:
        # The group is a label of the plan: one plan per call, as the group goes.
        where = {**self._where, self._label: group}
        plan = _Plan(self._pool, kind=self._kind, where=where, attempts=self._attempts, timeout=self._timeout)
        return plan.start(self._context or group)

    def _call(self, trace: str, group: str) -> _Call:
        """The call's attempts: those of its earlier attempts in the same
        model group, else new ones (a fallback to another group is another
        request). Calls silent too long, or too many, are ended."""
        with self._lock:
            call = self._calls.pop(trace, None)
            if call is not None and call.group != group:
                self._acquirer.soon(call.attempts.end)
                call = None
            if call is None:
                call = _Call(self._start(group), group)
            call.seen = time.monotonic()
            self._calls[trace] = call
            while self._calls:
                _, old = next(iter(self._calls.items()))
                if len(self._calls) <= self._max_calls and call.seen - old.seen < _LINGER:
                    break
                self._calls.popitem(last=False)
                self._acquirer.soon(old.attempts.end)
            return call

    def _take(self, trace: object) -> _Call | None:
        if not isinstance(trace, str):
            return None
        with self._lock:
            return self._calls.get(trace)

    def _drop(self, trace: str, call: _Call) -> None:
        with self._lock:
            if self._calls.get(trace) is call:
                del self._calls[trace]
        self._acquirer.soon(call.attempts.end)

    async def async_filter_deployments(
        self,
        model: str,
        healthy_deployments: list[Any],
        messages: Any,
        request_kwargs: dict[str, Any] | None = None,
        parent_otel_span: Any = None,
    ) -> list[Any]:
        trace = (request_kwargs or {}).get("litellm_trace_id")
        if not isinstance(trace, str) or not healthy_deployments:
            return healthy_deployments
        by_id = {d.get("model_info", {}).get("id"): d for d in healthy_deployments if isinstance(d, Mapping)}
        call = self._call(trace, model)
        if call.done:
            # The protocol said the request is at fault: LiteLLM's further
            # retries of it are its own, counted against no deployment.
            return healthy_deployments
        try:
            for _ in range(_MAX_PASSED):
                lease = await self._acquirer.acquire(call.attempts)
                await self._acquirer.call(call.attempts.begin, lease)
                chosen = by_id.get(lease.value)
                if chosen is not None:
                    call.leased = lease.value
                    return [chosen]
                # LiteLLM keeps this one out (a cooldown, another check):
                # it carries nothing, and the protocol now excludes it.
                await self._acquirer.call(call.attempts.end)
        except BaseException:  # a refusal, or the call cancelled: nothing is leased
            self._drop(trace, call)
            raise
        # Repute's choice and LiteLLM's do not meet: LiteLLM picks, unfollowed.
        self._drop(trace, call)
        return healthy_deployments

    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        trace = kwargs.get("litellm_trace_id")
        call = self._take(trace)
        if call is None or call.leased is None or call.leased != _deployment_id(kwargs):
            return
        headers = kwargs.get("response_headers") or {}
        pairs = [(str(k), str(v)) for k, v in headers.items()] if isinstance(headers, Mapping) else []
        try:
            if await self._acquirer.call(call.attempts.answered, 200, pairs) == "stream":
                await self._acquirer.call(call.attempts.finished, None)
        finally:
            self._drop(trace, call)

    async def async_log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        trace = kwargs.get("litellm_trace_id")
        call = self._take(trace)
        if call is None or call.leased is None or call.leased != _deployment_id(kwargs):
            return
        call.leased = None
        error = kwargs.get("exception")
        failure = _failure(error) if isinstance(error, BaseException) else None
        answer = _answer(error) if failure is None and isinstance(error, BaseException) else None
        step = "retry"
        try:
            if answer is not None:
                step = await self._acquirer.call(call.attempts.answered, *answer)
            elif failure is not None:
                step = await self._acquirer.call(call.attempts.failed, failure)
            else:  # raised before it was sent: the deployment is not at fault
                await self._acquirer.call(call.attempts.end)
        finally:
            if _last_try(kwargs):
                self._drop(trace, call)
            elif step != "retry":
                call.done = True
                await self._acquirer.call(call.attempts.end)
