# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""The OpenAI ingress of a ``ray_serve`` cluster, with the API key vLLM's ``--api-key`` would check.

Ray Serve LLM's OpenAI ingress checks no key (Ray 2.59/2.60: nothing in
``ray/llm/_internal/serve/core/ingress/ingress.py`` reads an ``Authorization`` header; a request
with any or no key is served). ``build_openai_app`` takes the ingress class from its arguments
(``ingress_cls_config.ingress_cls``, a ``module:Class`` string, built with
``ingress_cls_config.ingress_extra_kwargs``: ``ray/llm/_internal/serve/core/ingress/builder.py``),
so the collection ships this subclass and names it there:

- ``KeyedOpenAiIngress(OpenAiIngress)`` takes ``api_key_file``: the path of a file holding the key
  (root:<ray group> 0640 on every node of the cluster). The key itself is never an argument, so it
  is in no Serve config (``GET /api/serve/applications/``, ``serve config``), log or runtime_env.
- Its ``__serve_build_asgi_app__`` adds ``BearerKey`` (a plain ASGI middleware) to the FastAPI app
  the builder made. Serve calls that hook on every replica after the constructor, also for an app
  given to ``@serve.ingress`` (``ray/serve/_private/replica.py``, ``_initialize_asgi_callable``:
  ``if build_asgi_app is not None: ... self._callable._set_asgi_app(app)``; the same in 2.59).
  ``check_health`` fails a replica on which the hook did not run, so an ingress never serves
  unguarded for longer than Serve's first health check.
- Every path needs ``Authorization: Bearer <key>`` except ``/health`` (answered here with 200, as
  vLLM's ``/health``: vllm-router and the readiness gate ask it without a key) and ``/version``
  (vLLM's release, as vLLM's own server answers it: status.yml compares it). A wrong or missing
  key gets 401 with an OpenAI-style error body. The key is compared in constant time.
- The file is re-read when it changes (inode, size or mtime), so a new key takes effect without a
  redeploy; an unreadable or empty file keeps the last key (never opens the API).

Each model's replicas run ``LLMServer`` from here (``server_cls`` of every ``llm_configs`` entry),
Ray's own ``LLMServer`` with a health check that asks the engine itself. Ray's check only asks
whether vLLM's engine process died (``AsyncLLM.check_health``: ``if self.errored: raise``); an
engine that hangs (its EngineCore process stopped, a rank stuck in a collective) passes it forever
while every request waits. Here each check also sends a no-op call through the engine to every
worker (``collective_rpc("check_health")``: vLLM's workers answer it with nothing, between two
steps of the engine's loop) and fails when it takes longer than ``ENGINE_PROBE_TIMEOUT_S``, unless the
engine is busy: its processes on this host (its children, and its Ray workers, found by the message
queues they share) used CPU meanwhile and none is stopped (a step that takes long, as a new engine's
first one or a long prefill on a loaded host; it answers after that step). A busy engine passes
for up to ``ENGINE_BUSY_LIMIT_S`` of unanswered checks, then fails as any other. After
``ENGINE_FENCE_AFTER`` (3) failures in a row, the check at which Serve gives up on the replica
(``REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD``), the replica kills its own child processes (the engine
and its workers, which a stopped process would otherwise outlive, holding the accelerator's memory)
before it fails that check: the requests waiting on them fail, and Serve stops the replica and starts
another. Only the hung replica goes; Serve's own replacement does the rest. The class is named ``LLMServer`` because
Ray names a model's deployment after its class (``LLMServer:<model id>``).

Imported by the application's build task and its replicas, in the vLLM venv (the application's
``runtime_env`` puts this file's directory on ``PYTHONPATH``). The middleware, the key file and the
probe's bookkeeping need only the standard library (unit-tested without Ray); the ingress and
server classes exist only where Ray Serve LLM imports.
"""

import asyncio
import hmac
import json
import logging
import os
import signal
import time

logger = logging.getLogger("ray.serve")

# Paths answered without a key.
HEALTH_PATH = "/health"
VERSION_PATH = "/version"


class KeyFile:
    """The API key in a file, re-read when the file changes."""

    def __init__(self, path):
        self.path = path
        self._stamp = None
        self._key = b""

    def load(self):
        """Read the key now; raises ValueError (naming the file, never the key) when there is none."""
        with open(self.path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            key = handle.read().strip()
        if not key:
            raise ValueError("the API key file %s is empty" % self.path)
        self._key, self._stamp = key, (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        return key

    def current(self):
        """The key; re-read when the file changed. A failed re-read keeps the last good key."""
        try:
            stat = os.stat(self.path)
            stamp = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            if stamp != self._stamp:
                self.load()
        except (OSError, ValueError) as exc:
            if not self._key:
                raise ValueError("no API key: %s" % exc) from None
            logger.warning("rayvllm ingress: keeping the last API key: %s", exc)
        return self._key


def authorized(headers, key):
    """Whether the ASGI ``headers`` carry ``Authorization: Bearer <key>`` (constant-time compare)."""
    expected = b"Bearer " + key
    for name, value in headers:
        if name.lower() == b"authorization":
            return hmac.compare_digest(value.strip(), expected)
    return False


def vllm_version():
    """The vLLM release this process runs (the application's venv: the replicas' too); '' without vLLM."""
    try:
        from vllm import __version__
    except ImportError:
        return ""
    return str(__version__)


async def _respond(send, status, body):
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


class BearerKey:
    """ASGI middleware: ``/health`` answers 200 and ``/version`` vLLM's release, as vLLM's own server does without a
    key (vllm-router, the readiness gate and status.yml ask them); every other HTTP or websocket request needs it."""

    def __init__(self, app, key_file):
        self.app = app
        self.key_file = key_file

    async def __call__(self, scope, receive, send):
        kind = scope.get("type")
        if kind not in ("http", "websocket"):  # lifespan
            return await self.app(scope, receive, send)
        if kind == "http" and scope.get("path") == HEALTH_PATH:
            return await _respond(send, 200, {})
        if kind == "http" and scope.get("path") == VERSION_PATH:
            return await _respond(send, 200, {"version": vllm_version()})
        try:
            ok = authorized(scope.get("headers") or [], self.key_file.current())
        except ValueError:
            ok = False
        if ok:
            return await self.app(scope, receive, send)
        if kind == "websocket":
            return await send({"type": "websocket.close", "code": 1008})
        return await _respond(
            send,
            401,
            {
                "error": {
                    "message": "Missing or wrong API key: send 'Authorization: Bearer <key>'.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": 401,
                }
            },
        )


# The engine liveness check of each model's replicas (LLMServer below).
ENGINE_PROBE_TIMEOUT_S = 15.0
# Serve stops a replica after 3 failed checks in a row (REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD): the engine is
# killed at that check, not before, so that a check that fails twice and then passes costs no request.
ENGINE_FENCE_AFTER = 3
# An unanswered check while the engine's processes used at least this much CPU (none of them stopped) is a busy
# engine, not a hung one (a first step that compiles, a long prefill on a loaded host), for up to ENGINE_BUSY_LIMIT_S.
ENGINE_BUSY_CPU_S = 1.0
ENGINE_BUSY_LIMIT_S = 120.0


class EngineProbe:
    """One replica's engine liveness: ``check(call, fence, usage)`` runs ``call()`` (a coroutine function: the no-op
    call through the engine) within ``timeout``; a failure counts, and ``fence()`` runs once failures reach
    ``fence_after`` in a row. Raises RuntimeError on failure (Serve counts it as a failed health check).

    ``usage()`` (optional) returns ``(cpu_seconds, stopped_pids)`` of the engine's processes. A check that times out
    while they used ``busy_cpu`` CPU seconds or more and none is stopped is a busy engine: it passes, with a warning,
    until the engine has left checks unanswered for ``busy_limit`` seconds; after that, timeouts count as failures
    whatever the CPU (a rank spinning in a collective uses CPU too). An answer ends the busy spell."""

    def __init__(
        self,
        timeout=ENGINE_PROBE_TIMEOUT_S,
        fence_after=ENGINE_FENCE_AFTER,
        busy_cpu=ENGINE_BUSY_CPU_S,
        busy_limit=ENGINE_BUSY_LIMIT_S,
        clock=None,
    ):
        self.timeout = timeout
        self.fence_after = fence_after
        self.busy_cpu = busy_cpu
        self.busy_limit = busy_limit
        self.clock = clock or time.monotonic
        self.failures = 0
        self.fenced = False
        self.busy_since = None

    def _busy(self, before, after, started):
        """Whether an unanswered check is a busy engine (see the class); logs why."""
        if before is None or after is None:
            return False
        used, stopped = after[0] - before[0], after[1]
        if stopped or used < self.busy_cpu:
            return False
        if self.busy_since is None:
            self.busy_since = started
        busy_for = self.clock() - self.busy_since
        if busy_for >= self.busy_limit:
            return False
        logger.warning(
            "rayvllm: the vLLM engine of this replica did not answer a no-op call in %ss but its processes used "
            "%.1f s of CPU meanwhile: busy, not hung (checks unanswered for %.0f s; counted as failures after %.0f s)",
            self.timeout,
            used,
            busy_for,
            self.busy_limit,
        )
        return True

    async def check(self, call, fence, usage=None):
        before = _usage(usage)
        started = self.clock()
        try:
            await asyncio.wait_for(call(), self.timeout)
        except Exception as exc:  # a timeout, or the engine's own error
            timed_out = isinstance(exc, asyncio.TimeoutError)
            if timed_out and self._busy(before, _usage(usage), started):
                return
            self.failures += 1
            why = "no answer in %ss" % self.timeout if timed_out else repr(exc)[:300]
            if self.failures >= self.fence_after and not self.fenced:
                self.fenced = True
                killed = fence()
                logger.error(
                    "rayvllm: the vLLM engine of this replica is hung (%d failed checks in a row: %s); its "
                    "processes %s killed, Serve replaces the replica",
                    self.failures,
                    why,
                    killed,
                )
            raise RuntimeError(
                "rayvllm: the vLLM engine did not answer a no-op call (%s; %d failed in a row)" % (why, self.failures)
            ) from None
        self.failures = 0
        self.busy_since = None


def _usage(usage):
    """``usage()``, or None when there is none or it fails (the check then goes by the answer alone)."""
    if usage is None:
        return None
    try:
        return usage()
    except Exception:  # /proc unreadable: never let the bookkeeping fail a check
        return None


def _stats(proc="/proc"):
    """{pid: the fields of /proc/<pid>/stat after ``(comm)``} of every process (Linux)."""
    stats = {}
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, "stat")) as handle:
                stat = handle.read()
        except OSError:  # gone meanwhile
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after its last ')'.
        stats[int(entry)] = stat[stat.rindex(")") + 2 :].split()
    return stats


def _descendants(pid, stats):
    parents = {}
    for child, fields in stats.items():
        parents.setdefault(int(fields[1]), []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def descendants(pid, proc="/proc"):
    """The pids of ``pid``'s children, recursively, read from /proc (Linux)."""
    return _descendants(pid, _stats(proc))


def _shared_segments(pid, proc="/proc"):
    """The multiprocessing shared-memory segments (``/dev/shm/psm_*``) a process maps: vLLM's message queues
    between its engine and its workers."""
    try:
        with open(os.path.join(proc, str(pid), "maps")) as handle:
            return {line.split()[-1] for line in handle if "/dev/shm/psm_" in line}
    except (OSError, IndexError):
        return set()


class EngineUsage:
    """``usage()``: ``(cpu_seconds, stopped_pids)`` of one replica's engine processes on this host: its
    descendants (the EngineCore, multiprocessing workers) and the processes that share their message queues'
    memory (workers the engine started as Ray actors, which are not its children): the CPU time they have used
    so far (utime + stime) and those stopped by a signal (state T or t). The workers are looked for again only
    when the descendants change or a worker is gone (reading every process's memory map is the costly part)."""

    def __init__(self, pid=None, proc="/proc"):
        self.pid = os.getpid() if pid is None else pid
        self.proc = proc
        self.workers = []
        self._tree = None  # the descendants the workers were looked for with

    def __call__(self):
        stats = _stats(self.proc)
        tree = _descendants(self.pid, stats)
        if sorted(tree) != self._tree or any(worker not in stats for worker in self.workers):
            self._tree = sorted(tree)
            segments = set().union(*(_shared_segments(child, self.proc) for child in tree))
            others = [pid for pid in stats if pid != self.pid and pid not in tree] if segments else []
            self.workers = [pid for pid in others if segments & _shared_segments(pid, self.proc)]
        # Here every worker is alive and none is in the tree (both would have made the search above run again).
        ticks = os.sysconf("SC_CLK_TCK")
        cpu, stopped = 0.0, []
        for pid in tree + self.workers:
            fields = stats[pid]
            cpu += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime: fields 14 and 15 of stat
            if fields[0] in ("T", "t"):
                stopped.append(pid)
        return cpu, stopped


def kill_children(pid=None):
    """SIGKILL this process's children, recursively (a stopped process gets it too); the pids killed."""
    killed = []
    for child in descendants(os.getpid() if pid is None else pid):
        try:
            os.kill(child, signal.SIGKILL)
            killed.append(child)
        except OSError:  # gone meanwhile
            pass
    return killed


try:
    from ray.serve.llm.ingress import OpenAiIngress
    from ray.serve.llm import LLMServer as _RayLLMServer
except ImportError:  # unit tests, and any interpreter without Ray Serve LLM: only the middleware
    OpenAiIngress = _RayLLMServer = None

if _RayLLMServer is not None:

    class LLMServer(_RayLLMServer):
        """Ray Serve LLM's LLMServer whose health check also asks the engine (EngineProbe)."""

        async def check_health(self):
            await super().check_health()  # a dead engine process
            if self.engine is None:  # still starting
                return
            probe = self.__dict__.setdefault("_rayvllm_probe", EngineProbe())
            usage = self.__dict__.setdefault("_rayvllm_usage", EngineUsage())
            # No timeout for vLLM itself: its executor would give up on a worker's answer but not drop it, and the
            # next call (a step of the model) would read that late answer. The wait is bounded here instead; a late
            # answer to an abandoned call is dropped by vLLM's client.
            await probe.check(lambda: self.collective_rpc("check_health"), kill_children, usage)


if OpenAiIngress is not None:

    class KeyedOpenAiIngress(OpenAiIngress):
        """Ray Serve LLM's OpenAI ingress behind ``BearerKey``."""

        def __init__(self, llm_deployments, model_cards, *, api_key_file, **kwargs):
            super().__init__(llm_deployments, model_cards, **kwargs)
            self._rayvllm_key = KeyFile(api_key_file)
            self._rayvllm_key.load()  # a missing or empty file fails the replica, naming the file
            self._rayvllm_guarded = False

        async def __serve_build_asgi_app__(self):
            app = self.app
            app.add_middleware(BearerKey, key_file=self._rayvllm_key)
            self._rayvllm_guarded = True
            return app

        async def check_health(self):
            if not self._rayvllm_guarded:
                raise RuntimeError(
                    "the rayvllm API key check is not in place (Serve did not call __serve_build_asgi_app__): "
                    "this Ray version is not supported by rayvllm_serve_ingress"
                )
            await super().check_health()
