"""LiteLLM's Router with its defaults: one deployment per (key, model), the
key's rpm given per deployment as LiteLLM documents, `api_base` the local
provider. The router picks, retries and cools deployments down itself; the
harness only calls `router.acompletion` again while the deadline and the
attempt budget allow, as a caller of the router would.

LiteLLM must make no network call of its own: the runner sets
LITELLM_LOCAL_MODEL_COST_MAP before the import (the model price map is read
from the package, not downloaded) and telemetry is off.
"""

from __future__ import annotations

import asyncio
import logging
import os

from .base import MAX_ATTEMPTS, Outcome, UserRequest, now
from .llm import PROMPT

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")

import litellm

litellm.telemetry = False
litellm.suppress_debug_info = True
logging.getLogger("LiteLLM").setLevel(logging.CRITICAL)
logging.getLogger("LiteLLM Router").setLevel(logging.CRITICAL)


class KeyLiteLLM:
    name = "litellm"

    def __init__(self, keys: list[tuple[str, str, int]], models: list[str], base_url: str, format: str) -> None:
        """`keys`: (name, secret, rpm) of each key; `base_url` the provider's
        address, under which each format's path lies."""
        api_base = f"{base_url}/v1" if format == "openai" else base_url
        self._router = litellm.Router(
            model_list=[
                {
                    "model_name": model,
                    "litellm_params": {
                        "model": f"{format}/{model}",
                        "api_key": secret,
                        "api_base": api_base,
                        "rpm": rpm,
                    },
                    "model_info": {"id": f"{name}/{model}"},
                }
                for name, secret, rpm in keys
                for model in models
            ]
        )

    async def start(self) -> None:
        pass

    async def serve(self, request: UserRequest, deadline: float) -> Outcome:
        calls = 0
        while calls < MAX_ATTEMPTS and deadline - now() > 0:
            calls += 1
            try:
                await asyncio.wait_for(
                    self._router.acompletion(
                        model=request.context,
                        messages=PROMPT,
                        timeout=deadline - now(),
                        extra_headers={"x-rt-request": request.id},
                    ),
                    timeout=deadline - now(),
                )
            except Exception:  # the router raises LiteLLM's own error classes of every kind
                continue
            return Outcome(True, calls)
        return Outcome(False, calls)

    async def close(self) -> None:
        # The router's cached HTTP sessions outlive it otherwise.
        await litellm.close_litellm_async_clients()
