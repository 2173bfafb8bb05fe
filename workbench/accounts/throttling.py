"""Login throttling (django-axes): the client address failed logins are counted against.

Behind TRUSTED_PROXY_COUNT proxies REMOTE_ADDR is the nearest proxy's, the same for everyone; the
client's is then the X-Forwarded-For entry the outermost trusted proxy appended (that many from the
right). Entries further left are whatever the client sent and are never trusted.
"""

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str:
    trusted = settings.TRUSTED_PROXY_COUNT
    remote = request.META.get("REMOTE_ADDR", "")
    if trusted <= 0:
        return remote
    forwarded = [
        hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()
    ]
    return forwarded[-trusted] if len(forwarded) >= trusted else remote
