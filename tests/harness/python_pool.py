"""A Python process holding one tenant's pool on SQLite, through the `repute`
binding, for the fault harness: it answers the few routes of `repute serve`
that the harness's workload and checker use, so the same workers drive it
and the same checker judges it when it is killed with SIGKILL mid-load.

Usage: python python_pool.py SQLITE_PATH TENANT LEASE_TTL_SECONDS

Prints `listening on 127.0.0.1:PORT` once it serves. Checkpoints every
second, like the server scenario, so a kill lands near one and most of the
moment's grants and releases are only in the permit table and the log.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import repute

db, tenant, ttl = sys.argv[1], sys.argv[2], float(sys.argv[3])
pool = repute.Pool(f"sqlite:{db}", tenant=tenant, lease_ttl=ttl)
# The Lease objects of the grants this process made, by id: a release goes
# through the holder's object; one granted before a restart is resumed.
held: dict[int, repute.Lease] = {}
held_lock = threading.Lock()


def lease_json(lease: repute.Lease) -> dict[str, object]:
    return {
        "id": lease.id,
        "kind": lease.kind,
        "value": lease.value,
        "context": lease.context,
        "permit": lease.permit,
        "token": lease.token,
        "ttl_ms": lease.ttl * 1e3,
    }


def status_of(e: repute.ReputeError) -> int:
    """The status `repute serve` answers each error with."""
    if isinstance(e, (repute.UnknownResourceError, repute.UnknownLeaseError)):
        return 404
    if isinstance(e, repute.RateLimitedError):
        return 429
    if isinstance(e, repute.InvalidInputError):
        return 400
    if isinstance(e, repute.StoreError):
        return 503
    return 409


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def answer(self, status: int, body: object = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self) -> dict[str, object]:
        length = int(self.headers.get("Content-Length") or 0)
        parsed: dict[str, object] = json.loads(self.rfile.read(length) or b"{}")
        return parsed

    def run(self, route: str) -> None:
        try:
            self.answer(*getattr(self, route)())
        except repute.ReputeError as e:
            self.answer(status_of(e), {"title": type(e).__name__, "detail": str(e)})

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        routes = {"/readyz": "readyz", "/v1/leases": "leases", "/v1/snapshot": "snapshot"}
        self.run(routes.get(path, "missing"))

    def do_POST(self) -> None:
        routes = {"/v1/resources": "register", "/v1/leases": "acquire", "/v1/outcomes": "report"}
        self.run(routes.get(urlsplit(self.path).path, "missing"))

    def do_DELETE(self) -> None:
        self.run("release" if urlsplit(self.path).path.startswith("/v1/leases/") else "missing")

    def missing(self) -> tuple[int, object]:
        return 404, {"title": "No such route"}

    def readyz(self) -> tuple[int, object]:
        return 200, None

    def register(self) -> tuple[int, object]:
        b = self.body()
        pool.register(str(b["kind"]), str(b["value"]), int(b.get("permits", 1)))  # type: ignore[call-overload]
        return 204, None

    def acquire(self) -> tuple[int, object]:
        lease = pool.try_acquire(str(self.body()["context"]))
        if lease is None:
            return 409, {"title": "No resource available"}
        with held_lock:
            held[lease.id] = lease
        return 201, lease_json(lease)

    def report(self) -> tuple[int, object]:
        b = self.body()
        kind, value, context = str(b["kind"]), str(b["value"]), str(b["context"])
        latency = float(b.get("latency_ms", 0.0)) / 1e3  # type: ignore[arg-type]
        if b["outcome"] == "success":
            pool.report_success(kind, value, context, latency)
        else:
            pool.report_failure(kind, value, context, str(b["outcome"]), latency)
        return 204, None

    def release(self) -> tuple[int, object]:
        url = urlsplit(self.path)
        lease_id = int(url.path.rsplit("/", 1)[1])
        token = int(parse_qs(url.query)["token"][0])
        with held_lock:
            lease = held.pop(lease_id, None)
        if lease is None or lease.token != token:
            lease = pool.resume(lease_id, token)
        lease.release()
        return 204, None

    def leases(self) -> tuple[int, object]:
        snapshot = json.loads(pool.snapshot_json(True))
        live = [
            {"kind": r["resource"]["kind"], "value": r["resource"]["value"], "permit": r["permit"], "token": r["token"]}
            for r in snapshot["leases"] or []
        ]
        return 200, live

    def snapshot(self) -> tuple[int, object]:
        return 200, json.loads(pool.snapshot_json(True))


def checkpoints() -> None:
    while True:
        threading.Event().wait(1.0)
        pool.checkpoint(True)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
threading.Thread(target=checkpoints, daemon=True).start()
print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
