# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""Ask a vLLM OpenAI-compatible server whether it really serves a model.

Plain Python: unit-tested without vLLM, and shipped to managed hosts by Ansible's
module_utils mechanism. Requests go out with Ansible's open_url (module_utils/clients/http_request.py).

The API key is sent as ``Authorization: Bearer <key>`` and never appears in a
message, an exception or a return value: any excerpt of a server's answer is
scrubbed of it too.
"""

from __future__ import annotations

import json
import socket
import time

from http.client import HTTPException
from urllib.error import HTTPError, URLError
from urllib.request import Request

from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.http_request import read_status_and_body
from ansible_collections.rayvllm.fleet.plugins.module_utils.clients.ray_state import num_text

DEFAULT_REQUEST_TIMEOUT = 10.0
MIN_COMPLETION_TIMEOUT = 30.0
MODEL_ATTEMPTS = 5
EXCERPT_CHARS = 200
REDACTED = "********"


class VllmError(Exception):
    """A step failed. ``status`` is the last HTTP status seen (0: no answer, None: not an HTTP matter)."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class _NoAnswer(Exception):
    """No HTTP answer at all (connection refused, timeout, bad URL)."""


def base_url(url):
    """``http://host:8000/`` or ``http://host:8000/v1`` -> ``http://host:8000``."""
    url = url.rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url


def _redact(text, secret):
    if secret:
        text = text.replace(secret, REDACTED)
    return text


def _excerpt(body, secret):
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    text = " ".join(_redact(body or "", secret).split())
    if len(text) > EXCERPT_CHARS:
        text = text[:EXCERPT_CHARS] + "..."
    return _redact(text, secret) or "(empty body)"


def _reason(exc):
    reason = getattr(exc, "reason", exc) if isinstance(exc, URLError) else exc
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return "timed out"
    return str(reason) or type(reason).__name__


def _fetch(request, timeout, opener):
    """Send ``request``; return ``(status, body)``, HTTP errors included. No answer raises _NoAnswer."""
    try:
        return read_status_and_body(request, timeout, opener)
    except HTTPError as exc:
        try:
            body = exc.read()
        except (OSError, HTTPException, ValueError):
            body = b""
        return int(exc.code), body
    except (URLError, OSError, HTTPException, ValueError) as exc:
        raise _NoAnswer(_reason(exc))


def _headers(api_key, json_body=False):
    headers = {"Accept": "application/json"}
    if json_body:
        headers["Content-Type"] = "application/json"
    if api_key:
        headers["Authorization"] = "Bearer %s" % api_key
    return headers


def _key_refused(api_key):
    if api_key:
        return "the API key was refused (wrong api_key?)"
    return "the server requires an API key and api_key is empty"


def _http_error(what, status, body, api_key):
    if status in (401, 403):
        return VllmError("%s: HTTP %d, %s" % (what, status, _key_refused(api_key)), status=status)
    return VllmError("%s: HTTP %d: %s" % (what, status, _excerpt(body, api_key)), status=status)


def _json(what, body, api_key):
    try:
        return json.loads(body)
    except ValueError:
        raise VllmError("%s: the answer is not JSON: %s" % (what, _excerpt(body, api_key)))


def _health(url, timeout, opener):
    """``(status, reason)`` of ``GET {url}/health``; status 0 with the reason when there is no answer."""
    request = Request(base_url(url) + "/health")
    try:
        status, _body = _fetch(request, timeout, opener)
    except _NoAnswer as exc:
        return 0, str(exc)
    return status, ""


def get_health(url, timeout, opener=None):
    """Status code of ``GET {url}/health``; 0 when nothing answers (refused, timeout, unresolvable)."""
    return _health(url, timeout, opener)[0]


def list_models(url, api_key, timeout, opener=None):
    """Model ids served at ``GET {url}/v1/models``. Raises VllmError."""
    what = "GET %s/v1/models" % base_url(url)
    request = Request(base_url(url) + "/v1/models", headers=_headers(api_key))
    try:
        status, body = _fetch(request, timeout, opener)
    except _NoAnswer as exc:
        raise VllmError("%s: no answer: %s" % (what, exc), status=0)
    if status != 200:
        raise _http_error(what, status, body, api_key)
    payload = _json(what, body, api_key)
    try:
        return [str(entry["id"]) for entry in payload["data"]]
    except (KeyError, TypeError):
        raise VllmError("%s: unexpected JSON (no data[].id): %s" % (what, _excerpt(body, api_key)), status=status)


def complete(url, api_key, model, prompt, max_tokens, timeout, opener=None):
    """One greedy completion via ``POST {url}/v1/completions``.

    Returns ``{"completion_tokens": int, "text": str, "seconds": float}``. Raises
    VllmError on an HTTP error, no answer (timeout included) or 0 generated tokens.
    """
    what = "POST %s/v1/completions" % base_url(url)
    payload = {"model": model, "prompt": prompt, "max_tokens": int(max_tokens), "temperature": 0}
    request = Request(
        base_url(url) + "/v1/completions",
        data=json.dumps(payload).encode("utf-8"),
        headers=_headers(api_key, json_body=True),
        method="POST",
    )
    started = time.monotonic()
    try:
        status, body = _fetch(request, timeout, opener)
    except _NoAnswer as exc:
        raise VllmError("%s: no answer within %ss: %s" % (what, num_text(round(timeout, 1)), exc), status=0)
    seconds = time.monotonic() - started
    if status != 200:
        raise _http_error(what, status, body, api_key)
    answer = _json(what, body, api_key)
    try:
        tokens = int((answer.get("usage") or {}).get("completion_tokens") or 0)
        text = str(answer["choices"][0].get("text") or "")
    except (AttributeError, KeyError, IndexError, TypeError, ValueError):
        raise VllmError("%s: unexpected JSON (no choices[0].text): %s" % (what, _excerpt(body, api_key)), status=status)
    if tokens <= 0:
        raise VllmError(
            "%s: HTTP 200 but 0 completion tokens were generated: %s" % (what, _excerpt(body, api_key)), status=status
        )
    return {"completion_tokens": tokens, "text": _redact(text, api_key), "seconds": round(seconds, 3)}


def wait_ready(
    url,
    api_key,
    model,
    prompt,
    max_tokens,
    timeout,
    interval=5.0,
    request_timeout=None,
    opener=None,
    clock=time.monotonic,
    sleep=time.sleep,
    log=None,
    exited=None,
):
    """Wait until the server at ``url`` answers a completion for ``model``, in three steps.

    1. ``GET /health`` until 200, polled every ``interval`` s until ``timeout`` s have passed.
    2. ``model`` is among the ids of ``GET /v1/models``; only no answer or a 5xx is retried
       (a few times, within the deadline); a refused key or a missing model fails at once.
    3. One completion of ``max_tokens`` tokens, with the time left as its timeout (at least 30 s).

    Returns ``{"health_wait_s", "completion_tokens", "completion_s", "models"}``. Raises
    VllmError naming the step that failed and the last status seen. ``log(msg)``, when
    given, receives short progress lines. ``exited()``, when given, is asked after every
    unanswered health poll and returns None while the server process lives, or why it
    exited: then waiting stops at once (a server that rejects its arguments never answers).
    """
    log = log or (lambda msg: None)
    base = base_url(url)
    start = clock()
    poll_cap = float(request_timeout) if request_timeout else DEFAULT_REQUEST_TIMEOUT

    def elapsed():
        return clock() - start

    def poll_timeout():
        return max(1.0, min(poll_cap, timeout - elapsed()))

    def pause():
        sleep(max(0.0, min(interval, timeout - elapsed())))

    # 1. /health
    log("waiting for GET %s/health to answer 200 (up to %ss)" % (base, num_text(timeout)))
    while True:
        status, reason = _health(base, poll_timeout(), opener)
        if status == 200:
            break
        gone = exited() if exited else None
        if gone:
            raise VllmError(
                "vLLM at %s: the server exited before it answered /health (after %ss): %s. Check its journal."
                % (base, num_text(round(elapsed(), 1)), gone),
                status=status,
            )
        if elapsed() >= timeout:
            last = "0, no answer: %s" % reason if status == 0 else "%d" % status
            raise VllmError(
                "vLLM at %s: health never 200 after %ss (last status: %s). Is the vLLM service running and "
                "done loading the model? Check its journal." % (base, num_text(round(elapsed(), 1)), last),
                status=status,
            )
        pause()
    health_wait = elapsed()

    # 2. /v1/models
    log("health 200 after %ss; checking that %s is served" % (num_text(round(health_wait, 1)), model))
    attempts = 0
    while True:
        attempts += 1
        try:
            served = list_models(base, api_key, poll_timeout(), opener)
            break
        except VllmError as exc:
            retryable = exc.status == 0 or (exc.status or 0) >= 500
            if not retryable or attempts >= MODEL_ATTEMPTS or elapsed() >= timeout:
                raise VllmError(
                    "vLLM at %s: model check failed after %d attempt(s): %s (last status: %s)"
                    % (base, attempts, exc, "none" if exc.status is None else exc.status),
                    status=exc.status,
                )
            log("model list not available yet (%s); retrying" % exc)
            pause()
    served_text = _redact(", ".join(served) or "none", api_key)
    if model not in served:
        raise VllmError(
            "vLLM at %s: model %s missing: the server serves %s (last status: 200). Use the served name "
            "(vLLM's --served-model-name, else the model path)." % (base, _redact(model, api_key), served_text),
            status=200,
        )

    # 3. one completion
    completion_timeout = max(MIN_COMPLETION_TIMEOUT, timeout - elapsed())
    log("%s is served; asking for %d token(s) (timeout %ss)" % (model, max_tokens, num_text(round(completion_timeout))))
    try:
        result = complete(base, api_key, model, prompt, max_tokens, completion_timeout, opener)
    except VllmError as exc:
        raise VllmError(
            "vLLM at %s: completion failed: %s (last status: %s)"
            % (base, exc, "none" if exc.status is None else exc.status),
            status=exc.status,
        )
    return {
        "health_wait_s": round(health_wait, 3),
        "completion_tokens": result["completion_tokens"],
        "completion_s": result["seconds"],
        "models": [_redact(m, api_key) for m in served],
    }
