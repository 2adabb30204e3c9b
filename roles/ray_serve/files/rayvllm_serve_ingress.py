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
  vLLM's ``/health``: vllm-router and the readiness gate ask it without a key). A wrong or missing
  key gets 401 with an OpenAI-style error body. The key is compared in constant time.
- The file is re-read when it changes (inode, size or mtime), so a new key takes effect without a
  redeploy; an unreadable or empty file keeps the last key (never opens the API).

Imported by the application's build task and its ingress replicas, in the vLLM venv (the
application's ``runtime_env`` puts this file's directory on ``PYTHONPATH``). The middleware and the
key file need only the standard library (unit-tested without Ray); the ingress class exists only
where Ray Serve LLM imports.
"""

import hmac
import json
import logging
import os

logger = logging.getLogger("ray.serve")

# Paths answered without a key.
HEALTH_PATH = "/health"


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


async def _respond(send, status, body):
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


class BearerKey:
    """ASGI middleware: ``/health`` answers 200; every other HTTP or websocket request needs the key."""

    def __init__(self, app, key_file):
        self.app = app
        self.key_file = key_file

    async def __call__(self, scope, receive, send):
        kind = scope.get("type")
        if kind not in ("http", "websocket"):  # lifespan
            return await self.app(scope, receive, send)
        if kind == "http" and scope.get("path") == HEALTH_PATH:
            return await _respond(send, 200, {})
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


try:
    from ray.serve.llm.ingress import OpenAiIngress
except ImportError:  # unit tests, and any interpreter without Ray Serve LLM: only the middleware
    OpenAiIngress = None

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
