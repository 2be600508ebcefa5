"""`POST /hooks/<kind>`: the trackers' webhooks (connectors.hooks says what happens to one)."""

from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from search.contract.errors import error_body

from .hooks import Refused, receive, too_large


@csrf_exempt  # signed by the vendor, not by a browser session
def hook(request, kind: str):
    if request.method != "POST":
        body = error_body("method_not_allowed", "webhooks are delivered by POST, with a JSON body")
        return JsonResponse(body, status=405, headers={"Allow": "POST"})
    declared = request.META.get("CONTENT_LENGTH") or "0"
    try:
        if declared.isdigit() and int(declared) > settings.WEBHOOK_MAX_BYTES:
            raise too_large()
        body = request.read(settings.WEBHOOK_MAX_BYTES + 1)  # not request.body: its own, smaller limit
        taken = receive(kind, request.headers, body)
    except Refused as refused:
        headers = {"Retry-After": str(refused.retry_after)} if refused.retry_after else {}
        response = JsonResponse(error_body(refused.code, str(refused)), status=refused.status, headers=headers)
        # Not a line in the log each: a flood of strangers' deliveries would be a flood of
        # lines (Django's own log_response looks at this flag). The intake logs what an
        # operator must mend, once a minute (hooks.intake._warn_once), and counts the rest.
        response._has_been_logged = True
        return response
    status = 202 if taken.status == "accepted" else 200
    return JsonResponse({"status": taken.status, "message": taken.message}, status=status)
