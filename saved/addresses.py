"""Where a webhook may be sent: http(s) URLs, at public addresses unless allowed.

Checked when a saved search is saved (SavedSearch.clean) and again before
each send (saved.webhooks), since a host's address may change in between;
and the address a send actually connects to is checked once more
(`refused_address`, saved.webhooks), so a name that resolves elsewhere
between the check and the connection (DNS rebinding) reaches nothing
inside either. An IPv6 address that carries an IPv4 one (IPv4-mapped and
-compatible, NAT64's 64:ff9b::/96, 6to4, Teredo) is judged by the IPv4
address it reaches; local-use NAT64 (64:ff9b:1::/48) is inside by design.
"""

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings


class WebhookRefused(ValueError):
    """The URL may not be sent to; the message says why."""


def check_url(url: str) -> None:
    """Refuse what a webhook may not be: not http(s), no host, or (without
    SAVED_SEARCH_WEBHOOK_PRIVATE) a host at a private or reserved address."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookRefused(
            f"a webhook must be an http or https URL with a host, like https://example.com/hook; got {url!r}"
        )
    if settings.SAVED_SEARCH_WEBHOOK_PRIVATE:
        return
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = {info[4][0] for info in socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)}
    except (OSError, ValueError) as exc:
        raise WebhookRefused(f"the webhook's host {parts.hostname!r} cannot be resolved ({exc})") from exc
    for address in sorted(addresses):
        if why := refused_address(address):
            raise WebhookRefused(
                f"the webhook's host {parts.hostname!r} is at {why}, a private or reserved address; "
                "webhooks go to public addresses only (SAVED_SEARCH_WEBHOOK_PRIVATE allows others)"
            )


NAT64 = ipaddress.ip_network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def refused_address(address: str) -> str | None:
    """Why a webhook may not go to `address` (the address, or the IPv4 one it
    carries, as the message names it); None when it is public."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if ip.version == 6:
        if ip in NAT64_LOCAL:
            return f"{ip} (local-use NAT64)"
        carried = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if carried is None and (ip in NAT64 or (ip in IPV4_COMPATIBLE and int(ip) > 1)):
            carried = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if carried is not None:
            return f"{ip} (IPv4 {carried})" if _inside(carried) else None
    return str(ip) if _inside(ip) else None


def _inside(ip) -> bool:
    return not ip.is_global or ip.is_multicast
