"""How the modules' HTTP clients read a response (plugins/module_utils/clients/http_request.py), with fake openers."""

import urllib.error
import urllib.request

import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.clients import http_request


class Response:
    def __init__(self, body=b"{}", status=200, fail=None, getcode=None):
        self.body, self.status, self.fail, self.closed = body, status, fail, False
        if getcode is not None:
            self.status = None
            self.getcode = lambda: getcode

    def read(self):
        if self.fail:
            raise self.fail
        return self.body

    def close(self):
        self.closed = True


def opener_of(response, seen=None):
    def opener(request, timeout):
        if seen is not None:
            seen.append((request.full_url, request.get_method(), timeout))
        return response

    return opener


def test_the_status_and_body_of_a_response_and_the_response_closed():
    response, seen = Response(b'{"ok": true}', status=201), []
    request = urllib.request.Request("http://10.0.0.1:8265/api/serve/applications/", data=b"{}", method="PUT")
    assert http_request.read_status_and_body(request, 7, opener_of(response, seen)) == (201, b'{"ok": true}')
    assert seen == [("http://10.0.0.1:8265/api/serve/applications/", "PUT", 7)] and response.closed


def test_a_response_without_status_gives_its_getcode_and_read_response_gives_the_body():
    response = Response(b"body", getcode=204)
    request = urllib.request.Request("http://h/")
    assert http_request.read_status_and_body(request, 5, opener_of(response)) == (204, b"body")
    assert http_request.read_response(request, 5, opener_of(Response(b"text"))) == b"text"


def test_a_read_that_fails_still_closes_the_response_and_errors_pass_through():
    response = Response(fail=TimeoutError("timed out"))
    with pytest.raises(TimeoutError):
        http_request.read_response(urllib.request.Request("http://h/"), 5, opener_of(response))
    assert response.closed

    def refusing(request, timeout):
        raise urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))

    with pytest.raises(urllib.error.URLError, match="Connection refused"):
        http_request.read_response(urllib.request.Request("http://h/"), 5, refusing)


def test_open_request_sends_with_ansibles_open_url_without_netrc(monkeypatch):
    """The request's URL, body, headers and method go to open_url; ~/.netrc is never read (it would replace the
    bearer token)."""
    from ansible.module_utils import urls

    sent = {}

    def fake_open_url(url, **kwargs):
        sent.update(kwargs, url=url)
        return Response()

    monkeypatch.setattr(urls, "open_url", fake_open_url)
    request = urllib.request.Request(
        "http://10.0.0.1:8000/v1/models", headers={"Authorization": "Bearer k"}, method="GET"
    )
    http_request.open_request(request, timeout=3)
    assert sent["url"] == "http://10.0.0.1:8000/v1/models" and sent["method"] == "GET" and sent["timeout"] == 3
    assert sent["headers"] == {"Authorization": "Bearer k"} and sent["use_netrc"] is False and sent["data"] is None
