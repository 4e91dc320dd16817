"""A pool opened before os.fork() is refused in the child, clearly."""

from __future__ import annotations

import os

import pytest

import repute


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_child_gets_a_clear_error_and_can_open_its_own_pool() -> None:
    pool = repute.Pool()
    pool.register("proxy", "a")
    lease = pool.acquire("shop")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        code = 1
        try:
            os.close(read)
            try:
                pool.stats()
                message = "inherited pool answered"
            except repute.PoolClosedError as e:
                message = f"{e.code}: {e}"
            try:
                lease.release()
            except repute.PoolClosedError as e:
                message += f" | lease {e.code}"
            fresh = repute.Pool()
            fresh.register("proxy", "z")
            message += f" | fresh token {fresh.acquire('shop').token}"
            os.write(write, message.encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        message = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, message
    assert message.startswith("forked: this Pool was opened in process")
    assert "| lease forked" in message
    assert message.endswith("| fresh token 1")
    # The parent's pool is untouched.
    assert pool.stats().live_leases == 1
    lease.release()
