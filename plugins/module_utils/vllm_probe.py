# -*- coding: utf-8 -*-
# Copyright: rayvllm.fleet contributors
# Apache License 2.0 (see LICENSE)
"""What vllm-watchdog and vllm-router-health share on a host: one real completion as a probe, and
their small JSON state files.

Both programs are installed into /usr/local/lib/rayvllm with this file beside them (the
``vllm_watchdog`` and ``router`` roles copy it) and import it from there; in the collection
(unit tests) they import it as module_utils. Standard library only. The API key goes into the
``Authorization`` header, never into an error message.
"""

from __future__ import annotations

import json
import os
import time

from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen


def request(url, method="GET", body=None, api_key=None, timeout=10.0):
    """The body of one HTTP answer as text; a JSON body for ``body``, a bearer key for ``api_key``."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = "Bearer " + api_key
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    with urlopen(Request(url, data=data, headers=headers, method=method), timeout=timeout) as response:
        return response.read().decode("utf-8", "replace")


def completion(url, api_key, model, timeout, prompt="Hello", max_tokens=1):
    """(ok, error): one completion straight to a vLLM server; error ("" when ok) says what failed and when."""
    started = time.monotonic()
    try:
        body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
        answer = json.loads(request(url + "/v1/completions", "POST", body, api_key, timeout))
        if int((answer.get("usage") or {}).get("completion_tokens") or 0) > 0:
            return True, ""
        error = "HTTP 200 with 0 tokens"
    except HTTPError as exc:
        error = "HTTP %d" % exc.code
    except (URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        error = "no answer" if "timed out" in str(reason) else "no answer (%s)" % reason
    return False, "%s after %.1f s" % (error, time.monotonic() - started)


def load_json(path, default):
    """A state file's JSON, or ``default`` when it is missing or unreadable."""
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return default


def save(path, data):
    """Replace a file at once (readers never see half of it): text as it is, anything else as JSON."""
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(data if isinstance(data, str) else json.dumps(data))
    os.replace(tmp, path)
