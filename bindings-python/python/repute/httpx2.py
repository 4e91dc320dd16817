"""The transports of :mod:`repute.httpx` for httpx2, the HTTP library the
openai and anthropic SDKs are built on (``pip install repute[openai]``)::

    client = httpx2.Client(transport=repute.httpx2.Transport(pool, kind="proxy"))

The classes are :mod:`repute.httpx`'s own source, compiled once more with
``httpx2`` in place of ``httpx`` (the two share one API), so the two stay
the same code; ``httpx2.pyi`` gives their types.
"""

from __future__ import annotations

from pathlib import Path

_DOC = __doc__
_SOURCE = Path(__file__).with_name("httpx.py")
_IMPORT = "\nimport httpx\n"


def _compile() -> None:
    source = _SOURCE.read_text()
    if _IMPORT not in source:
        raise ImportError(f"repute.httpx2: {_SOURCE.name} no longer imports httpx on a line of its own")
    source = source.replace(_IMPORT, "\nimport httpx2 as httpx\n", 1)
    exec(compile(source, str(_SOURCE), "exec"), globals())


_compile()
__doc__ = _DOC
