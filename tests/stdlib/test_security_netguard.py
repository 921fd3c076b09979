"""Issue 17, Low: the SSRF guard refuses every special-purpose range, IPv4-translated
IPv6 (::ffff:0:a.b.c.d) included, and still lets public addresses through."""

from __future__ import annotations

import pytest

from stdlib_tools import StdlibConfig
from stdlib_tools.errors import ToolError
from stdlib_tools.netguard import is_blocked_ip

from stdlib_helpers import run, tools_by_name

SPECIAL = ["::ffff:0:7f00:1", "::ffff:0:a00:1", "192.0.0.8", "192.0.2.1", "198.18.0.1", "198.51.100.7",
           "203.0.113.9", "240.0.0.1", "::ffff:192.0.2.1", "2001:db8::1", "2001::1", "100::1", "fec0::1",
           "64:ff9b:1::a00:1"]


@pytest.mark.parametrize("address", SPECIAL)
def test_special_purpose_addresses_are_blocked(address):
    assert is_blocked_ip(address)


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "::ffff:8.8.8.8", "2606:4700::1111",
                                     "64:ff9b::808:808"])
def test_public_addresses_still_pass(address):
    assert not is_blocked_ip(address)


@pytest.mark.parametrize("url", ["http://[::ffff:0:7f00:1]:9/", "http://192.0.2.1/", "http://[2001:db8::1]/"])
def test_http_refuses_them_before_connecting(url):
    get = tools_by_name(StdlibConfig(), ["http"])["http.get"]
    with pytest.raises(ToolError) as info:
        run(get(url=url))
    assert info.value.code == "Http.Blocked"
