"""The SSRF guard as pure functions: address spellings, ranges, names, allow-list."""

from __future__ import annotations

import ipaddress

import pytest

from stdlib_tools import netguard
from stdlib_tools.errors import ToolError
from stdlib_tools.netguard import AllowList, check_url, is_blocked_ip, parse_ip_literal


@pytest.mark.parametrize("host,expected", [
    ("2130706433", "127.0.0.1"),          # decimal
    ("0x7f000001", "127.0.0.1"),          # hex
    ("0x7f.1", "127.0.0.1"),              # hex, short form
    ("0177.0.0.1", "127.0.0.1"),          # octal
    ("0177.0.0.01", "127.0.0.1"),
    ("127.1", "127.0.0.1"),               # short form
    ("017700000001", "127.0.0.1"),        # whole octal
    ("0", "0.0.0.0"),
    ("10.1", "10.0.0.1"),
    ("3232235777", "192.168.1.1"),
    ("8.8.8.8", "8.8.8.8"),
    ("[::1]", "::1"),
    ("::ffff:127.0.0.1", "::ffff:7f00:1"),
])
def test_numeric_spellings_are_decoded(host, expected):
    assert parse_ip_literal(host) == ipaddress.ip_address(expected)


@pytest.mark.parametrize("host", ["1.2.3.4.5", "256.0.0.1", "0999.1", "1.2.3.0x", "::zz", "1.2.3.999"])
def test_numeric_looking_garbage_is_refused(host):
    with pytest.raises(ToolError) as err:
        parse_ip_literal(host)
    assert err.value.code == "Http.Blocked"


@pytest.mark.parametrize("name", ["example.com", "1a.example.org", "x0x7f.com", "localhost"])
def test_names_are_not_literals(name):
    assert parse_ip_literal(name) is None


@pytest.mark.parametrize("ip", [
    "127.0.0.1", "127.255.255.254", "10.0.0.1", "10.255.0.9", "172.16.0.1", "172.31.255.255",
    "192.168.0.1", "169.254.169.254", "0.0.0.0", "::1", "fc00::1", "fd12:3456::1", "::",
    "fe80::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
    "::ffff:192.168.1.1", "::127.0.0.1", "2002:7f00:1::", "64:ff9b::a00:1",
])
def test_blocked_addresses(ip):
    assert is_blocked_ip(ip)


@pytest.mark.parametrize("ip", ["8.8.8.8", "93.184.216.34", "172.32.0.1", "172.15.255.255",
                                "192.169.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "11.0.0.1"])
def test_public_addresses(ip):
    assert not is_blocked_ip(ip)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/", "http://2130706433/", "http://0x7f.1/", "http://0177.0.0.1:8080/x",
    "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/",
    "http://169.254.169.254/latest/meta-data/", "http://metadata.google.internal/computeMetadata/v1/",
    "http://METADATA.google.internal./", "http://user@127.0.0.1/", "https://10.0.0.1/",
    "http://0/", "http://[fd00::1]/", "http://[0:0:0:0:0:ffff:127.0.0.1]/",
])
def test_check_url_blocks_private_urls(url, fake_dns):
    with pytest.raises(ToolError) as err:
        check_url(url)
    assert err.value.code == "Http.Blocked"
    assert fake_dns["__calls__"] == []  # refused without any DNS lookup


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://example.com/", "ftp://example.com/"])
def test_check_url_blocks_other_schemes(url):
    with pytest.raises(ToolError) as err:
        check_url(url)
    assert err.value.code == "Http.Blocked"


def test_dns_names_resolving_to_private_ranges(fake_dns):
    fake_dns["internal.example.com"] = ["10.0.0.7"]
    fake_dns["rebind.example.com"] = ["93.184.216.34", "192.168.1.10"]  # one bad answer is enough
    fake_dns["v6.example.com"] = ["::ffff:127.0.0.1"]
    fake_dns["public.example.com"] = ["93.184.216.34", "2606:2800:220:1::1"]
    for host in ("internal.example.com", "rebind.example.com", "v6.example.com"):
        with pytest.raises(ToolError) as err:
            check_url(f"https://{host}/path")
        assert err.value.code == "Http.Blocked"
        assert host in err.value.message
    assert check_url("https://public.example.com/") == ["93.184.216.34", "2606:2800:220:1::1"]


def test_resolution_failure_is_an_error(fake_dns):
    with pytest.raises(ToolError) as err:
        check_url("https://nowhere.invalid/")
    assert err.value.code == "Http.DnsFailure"


def test_allow_list_by_host_and_cidr(fake_dns):
    fake_dns["api.local"] = ["10.1.2.3"]
    fake_dns["svc.corp.example"] = ["10.9.9.9"]
    allow = AllowList(["API.local", "*.corp.example", "127.0.0.0/8", "::1"])
    assert check_url("http://api.local:8080/", allow) == ["api.local"]
    assert check_url("http://svc.corp.example/", allow) == ["svc.corp.example"]
    assert check_url("http://127.0.0.1/", allow) == ["127.0.0.1"]
    assert check_url("http://2130706433/", allow) == ["127.0.0.1"]
    assert check_url("http://[::1]/", allow) == ["::1"]
    assert check_url("http://[::ffff:127.0.0.1]/", allow) == ["::ffff:7f00:1"]
    with pytest.raises(ToolError):
        check_url("http://10.0.0.1/", allow)  # not in the allowed CIDR
    with pytest.raises(ToolError):
        check_url("http://metadata.google.internal/", allow)
    assert not AllowList([])
    # plain iterables work too
    assert check_url("http://127.0.0.5/", ["127.0.0.0/24"]) == ["127.0.0.5"]


def test_resolve_host_is_the_function_the_guard_calls(monkeypatch):
    seen = []
    monkeypatch.setattr(netguard, "resolve_host", lambda h, p=None: seen.append((h, p)) or ["10.0.0.1"])
    with pytest.raises(ToolError):
        check_url("https://Example.COM:8443/")
    assert seen == [("example.com", 8443)]
