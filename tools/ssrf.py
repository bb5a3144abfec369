"""Egress policy for ``net_http``: which hosts may be asked and which addresses may be reached.

Two independent gates:

* the domain allowlist (:func:`domain_allowed`), checked on the host name before any lookup;
* the address classifier (:func:`classify`), applied to every address the host resolves to,
  which refuses loopback, private, link-local, carrier-grade NAT, unique-local, multicast,
  reserved and cloud-metadata addresses, including their IPv4-mapped, IPv4-compatible,
  IPv4-translated, 6to4 and NAT64 IPv6 forms.

Operators may let chosen private hosts through with ``net_http.allowed_private_hosts``: a
host name there unblocks the addresses that name resolves to, an IP address or CIDR unblocks
the addresses it contains. Cloud-metadata addresses (in any of their IPv6 forms) are the
exception: they stay blocked unless an entry names that very address, so allowing a private
range or a host name never exposes the instance's credentials by accident.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "EgressPolicy",
    "IPAddress",
    "classify",
    "domain_allowed",
    "embedded_ipv4",
    "normalize_host",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
    )
)

_BLOCKED: tuple[tuple[_Network, str], ...] = tuple(
    (ipaddress.ip_network(net), why)
    for net, why in (
        ("0.0.0.0/8", "an unspecified (this-network) address"),
        ("10.0.0.0/8", "a private address"),
        ("172.16.0.0/12", "a private address"),
        ("192.168.0.0/16", "a private address"),
        ("100.64.0.0/10", "a carrier-grade NAT (shared) address"),
        ("127.0.0.0/8", "a loopback address"),
        ("169.254.0.0/16", "a link-local address"),
        ("192.0.0.0/24", "a reserved (IETF protocol) address"),
        ("192.0.2.0/24", "a reserved (documentation) address"),
        ("198.51.100.0/24", "a reserved (documentation) address"),
        ("203.0.113.0/24", "a reserved (documentation) address"),
        ("192.88.99.0/24", "a reserved (6to4 relay) address"),
        ("198.18.0.0/15", "a reserved (benchmarking) address"),
        ("224.0.0.0/4", "a multicast address"),
        ("240.0.0.0/4", "a reserved address"),
        ("::/128", "an unspecified address"),
        ("::1/128", "a loopback address"),
        ("fe80::/10", "a link-local address"),
        ("fec0::/10", "a site-local (private) address"),
        ("fc00::/7", "a unique-local (private) address"),
        ("ff00::/8", "a multicast address"),
        ("100::/64", "a reserved (discard) address"),
        ("64:ff9b:1::/48", "a local-use NAT64 (private) address"),
        ("2001::/23", "a reserved (IETF protocol) address"),
        ("2001:db8::/32", "a reserved (documentation) address"),
        ("3fff::/20", "a reserved (documentation) address"),
        ("5f00::/16", "a reserved (segment routing) address"),
    )
)

# IPv6 ranges that carry an IPv4 address in their low 32 bits.
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPATIBLE = ipaddress.ip_network("::/96")


def embedded_ipv4(addr: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address inside an IPv4-mapped/-translated/-compatible, NAT64 or 6to4 address.

    Returns:
        (:class:`ipaddress.IPv4Address`, :obj:`str`) | :obj:`None`: The address and the name of
        the form, or ``None`` when ``addr`` embeds no IPv4 address.
    """
    low = ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    if addr in _MAPPED:
        return low, "IPv4-mapped"
    if addr in _TRANSLATED:
        return low, "IPv4-translated"
    if addr in _NAT64:
        return low, "NAT64"
    if addr.sixtofour is not None:
        return addr.sixtofour, "6to4"
    if addr in _COMPATIBLE and int(addr) > 1:
        return low, "IPv4-compatible"
    return None


def classify(addr: IPAddress) -> str | None:
    """Why ``addr`` must not be reached, or ``None`` for a public address.

    Args:
        addr (:class:`ipaddress.IPv4Address` | :class:`ipaddress.IPv6Address`): The address.

    Returns:
        :obj:`str` | :obj:`None`: A phrase such as ``"a private address"``.
    """
    if isinstance(addr, ipaddress.IPv6Address) and addr.scope_id:
        addr = ipaddress.IPv6Address(addr.compressed.split("%", 1)[0])
    if addr in _METADATA:
        return "a cloud metadata address"
    if isinstance(addr, ipaddress.IPv6Address) and int(addr) > 1:
        inner = embedded_ipv4(addr)
        if inner is not None:
            v4, form = inner
            why = classify(v4)
            return f"{why} (the {form} form of {v4})" if why else None
    for net, why in _BLOCKED:
        if addr.version == net.version and addr in net:
            return why
    if not addr.is_global:
        return "not a public address"
    return None


def normalize_host(host: str) -> str:
    """Lower-case, IDNA-encoded, without a trailing dot."""
    host = host.strip().rstrip(".").lower()
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host


def domain_allowed(host: str, domains: Iterable[str]) -> bool:
    """Whether ``host`` is one of ``domains`` or a subdomain of one.

    ``example.com`` (or ``*.example.com``, or ``.example.com``) matches ``example.com`` and
    ``api.example.com`` but not ``badexample.com``; an IP address matches only itself.
    """
    host = normalize_host(host).strip("[]")
    is_address = _is_address(host)
    for entry in domains:
        domain = normalize_host(entry.strip().removeprefix("*.").lstrip(".")).strip("[]")
        if domain == host or (not is_address and domain and host.endswith("." + domain)):
            return True
    return False


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.replace("%25", "%"))
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class EgressPolicy:
    """Where ``net_http`` may go.

    Attributes:
        domains (tuple[:obj:`str`, ...]): The allowlist; empty means any host name.
        private_hosts (frozenset[:obj:`str`]): Host names exempt from the private-range block.
        private_networks (tuple[network, ...]): Addresses exempt from the private-range block.
    """

    domains: tuple[str, ...]
    private_hosts: frozenset[str]
    private_networks: tuple[_Network, ...]

    @classmethod
    def build(cls, domains: Iterable[str], allowed_private_hosts: Iterable[str]) -> EgressPolicy:
        hosts: set[str] = set()
        nets: list[_Network] = []
        for entry in allowed_private_hosts:
            text = entry.strip().strip("[]")
            try:
                nets.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                hosts.add(normalize_host(text))
        return cls(tuple(d for d in domains if d.strip()), frozenset(hosts), tuple(nets))

    def host_allowed(self, host: str) -> bool:
        return not self.domains or domain_allowed(host, self.domains)

    def address_problem(self, host: str, addr: IPAddress) -> str | None:
        """Why ``addr`` (an address of ``host``) is blocked under this policy, or ``None``."""
        why = classify(addr)
        if why is None:
            return None
        candidates = _forms(addr)
        if any(a in _METADATA for a in candidates):
            return None if self._names_exactly(candidates) else why
        if any(a in net for a in candidates for net in self.private_networks if a.version == net.version):
            return None
        if normalize_host(host) in self.private_hosts:
            return None
        return why

    def _names_exactly(self, candidates: list[IPAddress]) -> bool:
        """Whether an entry is one of ``candidates`` itself (an address, or a /32 or /128)."""
        return any(
            net.num_addresses == 1 and a == net.network_address
            for a in candidates
            for net in self.private_networks
            if a.version == net.version
        )


def _forms(addr: IPAddress) -> list[IPAddress]:
    """``addr`` without its IPv6 zone, and the IPv4 address it embeds, if any."""
    if isinstance(addr, ipaddress.IPv4Address):
        return [addr]
    bare = ipaddress.IPv6Address(addr.compressed.split("%", 1)[0]) if addr.scope_id else addr
    inner = embedded_ipv4(bare)
    return [bare, inner[0]] if inner else [bare]
