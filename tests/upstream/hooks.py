"""The vendors' webhook deliveries, as each sends them: shape, headers, signature.

- GitHub: `X-GitHub-Event`, `X-GitHub-Delivery` (a GUID, the same on a
  redelivery), `X-Hub-Signature-256: sha256=<HMAC-SHA256 of the body>`,
  `User-Agent: GitHub-Hookshot/...`; the body holds the `action`, the whole
  `issue` as the REST API shows it, the `repository` and the `sender`.
- Jira (Cloud and Data Center admin webhooks): `X-Atlassian-Webhook-Identifier`
  (unchanged across retries), `X-Hub-Signature: sha256=...` when the webhook
  has a secret; the body holds `timestamp` (epoch ms), `webhookEvent`,
  `issue_event_type_name`, the `issue` (REST v2's shape) and a `changelog`,
  or for a link, `issueLink` with the two issues' ids only.
- TestRail (7.5+): no signature; the admin adds a header (ours:
  `X-Webhook-Secret`) and writes the payload template docs/connectors.md gives.

`Delivery.post(url)` sends one over HTTP; `Delivery.through(client)` through
Django's test client (the same view, without a socket).
"""

import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass

import requests


@dataclass
class Delivery:
    kind: str
    headers: dict[str, str]
    body: bytes

    def post(self, base_url: str, timeout: float = 10) -> requests.Response:
        return requests.post(f"{base_url}/hooks/{self.kind}", data=self.body, headers=self.headers, timeout=timeout)

    def through(self, client):
        extra = {k: v for k, v in self.headers.items() if k.lower() != "content-type"}
        return client.post(f"/hooks/{self.kind}", data=self.body, content_type="application/json", headers=extra)

    def resigned(self, secret: str) -> "Delivery":
        """The same delivery signed with another secret (an attacker's guess)."""
        headers = dict(self.headers)
        for name in ("X-Hub-Signature-256", "X-Hub-Signature"):
            if name in headers:
                headers[name] = signature(secret, self.body)
        if "X-Webhook-Secret" in headers:
            headers["X-Webhook-Secret"] = secret
        return Delivery(self.kind, headers, self.body)


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def github(fake, event: str, action: str, number: int, secret: str, *, issue: dict | None = None, **extra) -> Delivery:
    """What GitHub sends for `event` (issues, issue_comment) and `action` on issue `number`
    of the fake's main repository (`issue`: the issue as it was, for a deleted one)."""
    repo = fake.repos[fake.main]
    payload = {
        "action": action,
        "issue": issue if issue is not None else repo["issues"][number],
        "repository": repo["meta"],
        "sender": fake.user("frg"),
        **extra,
    }
    body = json.dumps(payload).encode()
    return Delivery(
        "github",
        {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/2b5a8f1",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-GitHub-Hook-ID": "500000001",
            "X-Hub-Signature-256": signature(secret, body),
        },
        body,
    )


def jira(
    fake, event: str, secret: str, *, issue: dict | None = None, link: tuple[dict, dict] | None = None
) -> Delivery:
    """What Jira sends for `event` (jira:issue_created, jira:issue_updated,
    jira:issue_deleted about `issue`; issuelink_created, issuelink_deleted about `link`)."""
    payload: dict = {"timestamp": int(time.time() * 1000), "webhookEvent": event}
    if issue is not None:
        payload |= {
            "issue_event_type_name": event.split(":")[-1],
            "user": {"accountId": "abc123", "displayName": "QA Bot"},
            "issue": json.loads(json.dumps(issue)),
            "changelog": {"id": "10400", "items": []},
        }
    if link is not None:
        source, destination = link
        payload["issueLink"] = {
            "id": 10001,
            "sourceIssueId": int(source["id"]),
            "destinationIssueId": int(destination["id"]),
            "issueLinkType": {
                "id": 10002,
                "name": "Duplicate",
                "outwardName": "duplicates",
                "inwardName": "is duplicated by",
                "isSubTaskLinkType": False,
                "isSystemLinkType": False,
            },
            "systemLink": False,
        }
    body = json.dumps(payload).encode()
    return Delivery(
        "jira",
        {
            "Content-Type": "application/json",
            "User-Agent": "Atlassian Webhook HTTP Client",
            "X-Atlassian-Webhook-Identifier": str(uuid.uuid4()),
            "X-Atlassian-Webhook-Flow": "Primary",
            "X-Hub-Signature": signature(secret, body),
        },
        body,
    )


def testrail(event: str, project_id: int, case_id: int, secret: str) -> Delivery:
    """What a TestRail webhook with the payload template of docs/connectors.md sends."""
    body = json.dumps({"event": event, "project_id": project_id, "data": {"id": case_id}}).encode()
    return Delivery(
        "testrail",
        {"Content-Type": "application/json", "User-Agent": "TestRail", "X-Webhook-Secret": secret},
        body,
    )
