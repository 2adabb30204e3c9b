import pytest

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.listen_address import listen_url


@pytest.mark.parametrize(
    ("listen", "any_host", "url"),
    [
        ("0.0.0.0:9090", "127.0.0.1", "http://127.0.0.1:9090"),
        (":9100", "10.0.0.11", "http://10.0.0.11:9100"),
        ("[::]:3000", "fd00::1", "http://[fd00::1]:3000"),
        ("10.0.0.5:9090", "127.0.0.1", "http://10.0.0.5:9090"),  # a concrete listen address is kept
        ("[fd00::5]:9090", "127.0.0.1", "http://[fd00::5]:9090"),
    ],
)
def test_listen_url(listen, any_host, url):
    assert listen_url(listen, any_host) == url


@pytest.mark.parametrize("bad", ["9090", "0.0.0.0:", "host:http", "0.0.0.0:70000"])
def test_not_host_port(bad):
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        listen_url(bad)
