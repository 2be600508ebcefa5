"""Where a webhook may be sent: http(s) URLs, at public addresses unless allowed.

Checked when a saved search is saved (SavedSearch.clean) and again before
each send (saved.webhooks), since a host's address may change in between.
A host that resolves again between the check and the connection could still
point elsewhere (DNS rebinding); the check closes the plain cases (a URL at
127.0.0.1, 10.x, 169.254.169.254, a name that resolves there), not that one.
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
        ip = ipaddress.ip_address(address.split("%")[0])
        if not ip.is_global or ip.is_multicast:
            raise WebhookRefused(
                f"the webhook's host {parts.hostname!r} is at {ip}, a private or reserved address; "
                "webhooks go to public addresses only (SAVED_SEARCH_WEBHOOK_PRIVATE allows others)"
            )
