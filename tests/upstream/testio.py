"""The TestIO Customer API v2 on loopback, under /customer/v2.

What it serves, as the vendor documents it (test-IO/testio-guides, the API
Blueprint testio-mcp bundles) and testio-mcp sees it:

- `GET /products/{id}` -> `{"product": {...}}`; `GET /products/{id}/features`
  -> `{"features": [...]}`;
- `GET /products/{id}/exploratory_tests?page=N&per_page=M`, newest first
  (by `end_at`), `per_page` 25 unless given, with no paging metadata;
  without `page`, the newest 150 and no paging at all; `ignore_paging`
  makes it answer like TestIO's staging host, which always does that;
- `GET /exploratory_tests/{id}` -> `{"exploratory_test": {...}}`;
- `GET /bugs?filter_product_ids=..&filter_test_cycle_ids=..&page=&per_page=`
  (comma-separated ids), newest first, `per_page` at most 500 (25 when only
  `page` is given, 500 without), a `meta` with `record_count`; 0 or less
  is a 400; `GET /bugs/{id}` -> `{"bug": {...}}`.

Every request needs `Authorization: Token <token>`; a bad one is a 401 with
a JSON body. An unknown product is a 404. The bodies of the errors are not
documented (the docs say "an error message in the response body"; the one
example is `{"error": "..."}`): these are that shape, in plausible words.
Bugs carry `steps` as a list of strings, as testio-mcp sees real responses.
"""

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from .server import Request, Response, Upstream

PREFIX = "/customer/v2"
UNAUTHORIZED = {"error": "Invalid API token. Create one under Integrations > API."}


class FakeTestIO(Upstream):
    def __init__(self, token: str = "testio-token"):
        super().__init__()
        # Tests end relative to now: which tests are still moving is judged against the real clock.
        self.clock = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        self.token = token
        self.ignore_paging = False
        self.bug_page_cap = 500  # the documented maximum of per_page for bugs
        self.bug_meta = True  # False: bug pages without `meta` (a server that does not count)
        self.products: dict[int, dict] = {}
        self.features: dict[int, list[dict]] = {}  # by product id
        self.tests: dict[int, dict] = {}
        self.bugs: dict[int, dict] = {}
        self.next_test = 2100
        self.next_test_feature = 88000
        self.next_bug = 480000

    @property
    def base(self) -> str:
        return self.url + PREFIX

    # -- data ------------------------------------------------------------------------------------------

    def stamp(self, when: datetime) -> str:
        """TestIO's times: ISO 8601 in the account's zone (Berlin, +01:00 in winter)."""
        return when.astimezone(UTC).replace(microsecond=0).astimezone(_BERLIN).isoformat()

    def add_product(self, product_id: int, name: str, description: str, features: list[dict]) -> dict:
        product = {
            "id": product_id,
            "name": name,
            "description": description,
            "type": "mobile_app",
            "default_section_id": product_id * 10,
            "sections": [],
            "sections_with_default": [{"id": product_id * 10, "name": "default-section", "connection": None}],
            "connection": None,
            "remote_device_testing": False,
        }
        self.products[product_id] = product
        self.features[product_id] = [
            {
                "id": f["id"],
                "title": f["title"],
                "description": f.get("description", ""),
                "howtofind": f.get("howtofind", ""),
                "user_stories": f.get("user_stories", []),
            }
            for f in features
        ]
        return product

    def feature(self, product_id: int, feature_id: int) -> dict:
        return next(f for f in self.features[product_id] if f["id"] == feature_id)

    def add_test(
        self,
        product_id: int,
        title: str,
        *,
        features: list[int],
        start: datetime,
        end: datetime,
        status: str,
        goal: str,
        instructions: str = "",
        out_of_scope: str = "",
        platform: tuple[str, str] = ("android", "Android"),
    ) -> dict:
        self.next_test += 1
        test_features = []
        for feature_id in features:
            self.next_test_feature += 1
            feature = self.feature(product_id, feature_id)
            test_features.append(
                {
                    "id": self.next_test_feature,
                    "feature_id": feature_id,
                    "title": feature["title"],
                    "description": feature["description"],
                    "location": feature["howtofind"],
                    "howtofind": feature["howtofind"],
                    "enable_default": True,
                    "enable_content": None,
                    "enable_visual": True,
                    "user_stories": feature["user_stories"],
                }
            )
        product = self.products[product_id]
        os_key, os_name = platform
        test = {
            "id": self.next_test,
            "test_title": title,
            "title": title,
            "status": status,
            "test_environment": {
                "id": 7,
                "title": f"{product['name']} beta build",
                "url": "https://appdistribution.example/orbit",
            },
            "features": test_features,
            "goal": f"**{goal}**",
            "goal_text": goal,
            "out_of_scope": out_of_scope,
            "out_of_scope_text": out_of_scope,
            "instructions": instructions,
            "instructions_text": instructions,
            "testing_type": "coverage",
            "requirements": [
                {
                    "operating_system": {"id": 9 if os_key == "android" else 8, "key": os_key, "name": os_name},
                    "browsers": [],
                    "category": {"id": 2, "key": "smartphones", "name": "Smartphones"},
                }
            ],
            "report_language": "en",
            "section": {"id": product["default_section_id"], "name": "default-section"},
            "product": {
                "id": product_id,
                "name": product["name"],
                "type": product["type"],
                "default_section_id": product["default_section_id"],
            },
            "enable_low": True,
            "enable_high": True,
            "enable_critical": True,
            "created_by": None,
            "submitted_by": None,
            "start_at": self.stamp(start),
            "end_at": self.stamp(end),
            "review_status": "review_successful",
            "demo": False,
        }
        self.tests[test["id"]] = test
        return test

    def add_bug(
        self,
        test_id: int,
        title: str,
        *,
        feature: int,
        severity: str = "high",
        status: str = "forwarded",
        actual: str,
        expected: str,
        steps: list[str],
        device: tuple[str, str, str, str],
        reported: datetime,
        known: bool = False,
        comments: list[str] = (),
        author: str = "tester",
    ) -> dict:
        test = self.tests[test_id]
        product_id = test["product"]["id"]
        product_feature = self.feature(product_id, feature)
        test_feature = next(f for f in test["features"] if f["feature_id"] == feature)
        self.next_bug += 1
        vendor, model, system, category = device
        bug = {
            "id": self.next_bug,
            "title": title,
            "severity": severity,
            "status": status,
            "auto_accepted": False,
            "language": "en",
            "location": f"{product_feature['howtofind']}",
            "expected_result": expected,
            "actual_result": actual,
            "steps": list(steps),
            "known": known,
            "exported_at": None,
            "reported_at": self.stamp(reported),
            "created_at": self.stamp(reported),
            "author": {"name": author},
            "test": {"id": test_id, "title": test["title"]},
            "test_feature": {"id": test_feature["id"], "feature_id": feature},
            "feature": {
                "id": feature,
                "title": product_feature["title"],
                "description": product_feature["description"],
                "howtofind": product_feature["howtofind"],
            },
            "product": {"id": product_id, "name": self.products[product_id]["name"]},
            "comments": [
                {"id": self.next_bug * 10 + n, "body": body, "author": {"name": "Customer"}}
                for n, body in enumerate(comments)
            ],
            "devices": [
                {
                    "id": 300 + len(model),
                    "category": {"name": category},
                    "vendor": {"name": vendor},
                    "devices": {"name": model},
                    "operating_system": {"id": 9, "name": system},
                    "browsers": [],
                }
            ],
            "attachments": [{"id": self.next_bug * 10, "url": f"https://attachments.example/{self.next_bug}.mp4"}],
        }
        self.bugs[bug["id"]] = bug
        return bug

    def edit_bug(self, bug_id: int, **fields) -> dict:
        self.bugs[bug_id].update(fields)
        return self.bugs[bug_id]

    def delete_bug(self, bug_id: int) -> None:
        del self.bugs[bug_id]

    def tests_of(self, product_id: int) -> list[dict]:
        """Newest first, by end_at (then id), as the API lists them."""
        tests = [t for t in self.tests.values() if t["product"]["id"] == product_id]
        return sorted(tests, key=lambda t: (datetime.fromisoformat(t["end_at"]), t["id"]), reverse=True)

    # -- the API ----------------------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Token {self.token}":
            return Response(401, UNAUTHORIZED)
        path = request.path.removeprefix(PREFIX)
        if request.path == path:
            return Response(404, {"error": "Not found"})
        if m := re.fullmatch(r"/products/(\d+)(/features|/exploratory_tests)?", path):
            product = self.products.get(int(m.group(1)))
            if product is None:
                return Response(404, {"error": f"Product with id {m.group(1)} not found"})
            if m.group(2) == "/features":
                return Response(200, {"features": self.features[product["id"]]})
            if m.group(2) == "/exploratory_tests":
                return self.exploratory_tests(product["id"], request.query)
            return Response(200, {"product": product})
        if m := re.fullmatch(r"/exploratory_tests/(\d+)", path):
            test = self.tests.get(int(m.group(1)))
            if test is None:
                return Response(404, {"error": f"Exploratory test with id {m.group(1)} not found"})
            return Response(200, {"exploratory_test": test})
        if path == "/bugs":
            return self.list_bugs(request.query)
        if m := re.fullmatch(r"/bugs/(\d+)", path):
            bug = self.bugs.get(int(m.group(1)))
            return (
                Response(200, {"bug": bug}) if bug else Response(404, {"error": f"Bug with id {m.group(1)} not found"})
            )
        return Response(404, {"error": "Not found"})

    def exploratory_tests(self, product_id: int, query: dict) -> Response:
        tests = self.tests_of(product_id)
        if "page" not in query or self.ignore_paging:
            return Response(200, {"exploratory_tests": tests[:150]})
        page = max(int(query["page"]), 1)
        per_page = int(query.get("per_page", 25))
        return Response(200, {"exploratory_tests": tests[(page - 1) * per_page : page * per_page]})

    def list_bugs(self, query: dict) -> Response:
        bugs = sorted(self.bugs.values(), key=lambda b: b["id"], reverse=True)
        if products := _ids(query.get("filter_product_ids")):
            bugs = [b for b in bugs if b["product"]["id"] in products]
        if tests := _ids(query.get("filter_test_cycle_ids")):
            bugs = [b for b in bugs if b["test"]["id"] in tests]
        per_page = int(query.get("per_page", 25 if "page" in query else 500))
        if per_page <= 0:
            return Response(400, {"error": "per_page must be a positive number"})
        per_page = min(per_page, self.bug_page_cap)
        page = max(int(query.get("page", 1)), 1)
        body = {"bugs": bugs[(page - 1) * per_page : page * per_page]}
        if self.bug_meta:
            body["meta"] = {"record_count": len(bugs), "page": page, "per_page": per_page}
        return Response(200, body)

    # -- the story's product ------------------------------------------------------------------------------

    @classmethod
    def orbit_pay(cls, weeks: int = 52, **options) -> "FakeTestIO":
        """Orbit Pay, a mobile wallet: a year of weekly exploratory tests of its
        releases (Android and iOS in turn), newest still running, each with a
        few of the bugs such apps have."""
        fake = cls(**options)
        fake.add_product(
            4711, "Orbit Pay", "Mobile wallet for iOS and Android: send money, top up cards, pay by QR", FEATURES
        )
        now = fake.clock
        for week in range(weeks - 1, -1, -1):  # oldest first: ids grow with time
            end = now - timedelta(days=7 * week) + timedelta(days=2)  # the newest ends in two days
            start = end - timedelta(days=3)
            android = week % 2 == 0
            release = f"5.{52 - week}"
            features = [ROTATION[(week + n) % len(ROTATION)] for n in range(1 + week % 3)]
            status = (
                "running"
                if end > now
                else "customer_finalized"
                if end > now - timedelta(days=7)
                else ("cancelled" if week == 30 else "archived")
            )
            test = fake.add_test(
                4711,
                f"Release {release} exploratory test ({'Android' if android else 'iOS'})",
                features=features,
                start=start,
                end=end,
                status=status,
                platform=("android", "Android") if android else ("ios", "iOS"),
                goal=f"Find functional bugs in Orbit Pay {release} before it ships to the stores",
                instructions="Use the test account from the test environment. Top up with the sandbox card "
                "4111 1111 1111 1111. Record a video for every crash.",
                out_of_scope="Card issuing and the web dashboard",
            )
            if status == "cancelled":
                continue
            for n in range(1 + (week * 7) % 4):
                template = BUGS[(week * 3 + n) % len(BUGS)]
                feature = features[n % len(features)]
                device = (
                    ANDROID_DEVICES[(week + n) % len(ANDROID_DEVICES)]
                    if android
                    else IOS_DEVICES[(week + n) % len(IOS_DEVICES)]
                )
                verdict = ("accepted", "rejected", "forwarded", "accepted")[(week + n) % 4] if week > 1 else "forwarded"
                fake.add_bug(
                    test["id"],
                    template[feature]["title"],
                    feature=feature,
                    severity=template["severity"],
                    status=verdict,
                    actual=template[feature]["actual"],
                    expected=template[feature]["expected"],
                    steps=template[feature]["steps"],
                    device=device,
                    reported=start + timedelta(hours=5 + 7 * n),
                    author=TESTERS[(week + n) % len(TESTERS)],
                    known=verdict == "rejected" and week % 3 == 0,
                    comments=["Known issue, tracked as ORB-2291."]
                    if verdict == "rejected" and week % 3 == 0
                    else ["Not reproducible on our devices."]
                    if verdict == "rejected"
                    else [],
                )
        return fake


def _ids(value: str | None) -> set[int]:
    return {int(part) for part in (value or "").split(",") if part.strip()}


_BERLIN = ZoneInfo("Europe/Berlin")

SEND, TOPUP, QR, LOGIN, PUSH = 501, 502, 503, 504, 505
FEATURES = [
    {
        "id": SEND,
        "title": "Send money",
        "description": "Send money to a contact or an IBAN",
        "howtofind": "Home > Send",
        "user_stories": ["As a user I can send money to a contact from my phone book"],
    },
    {
        "id": TOPUP,
        "title": "Card top-up",
        "description": "Top up the wallet from a saved debit card",
        "howtofind": "Wallet > Top up",
        "user_stories": ["As a user I can top up with a saved card and 3-D Secure"],
    },
    {
        "id": QR,
        "title": "Pay by QR code",
        "description": "Scan a merchant's QR code and pay",
        "howtofind": "Home > Scan",
        "user_stories": ["As a user I can pay a shop by scanning its QR code"],
    },
    {
        "id": LOGIN,
        "title": "Biometric login",
        "description": "Unlock the app with a fingerprint or Face ID",
        "howtofind": "App start",
        "user_stories": ["As a user I can unlock the app with my fingerprint"],
    },
    {
        "id": PUSH,
        "title": "Payment notifications",
        "description": "Push notifications for money in and out",
        "howtofind": "Settings > Notifications",
        "user_stories": ["As a user I am notified when money arrives"],
    },
]
ROTATION = [SEND, TOPUP, QR, LOGIN, PUSH]
ANDROID_DEVICES = [
    ("Samsung", "Galaxy S23", "Android 14", "Smartphones"),
    ("Google", "Pixel 8", "Android 15", "Smartphones"),
    ("Xiaomi", "Redmi Note 12", "Android 13", "Smartphones"),
    ("Samsung", "Galaxy Tab S9", "Android 14", "Tablets"),
]
IOS_DEVICES = [
    ("Apple", "iPhone 15", "iOS 18", "Smartphones"),
    ("Apple", "iPhone SE (3rd generation)", "iOS 17", "Smartphones"),
    ("Apple", "iPad Air (5th generation)", "iPadOS 18", "Tablets"),
]
TESTERS = ["mkowalska", "j.okafor", "tester_rui", "anhnguyen", "s.brandt"]


def _bug(title, actual, expected, steps):
    return {"title": title, "actual": actual, "expected": expected, "steps": steps}


# Bug templates: one report a feature for each kind of failure.
BUGS = [
    {
        "severity": "critical",
        SEND: _bug(
            "App crashes when sending money to a contact with an emoji in the name",
            "The app closes as soon as the contact is picked",
            "The amount screen opens for the contact",
            ["Open Send", "Tap 'Choose contact'", "Pick a contact named 'Mom 💐'"],
        ),
        TOPUP: _bug(
            "Top-up charged twice after 3-D Secure times out",
            "Two charges of 50.00 EUR appear on the card statement and one top-up in the wallet",
            "The card is charged once, or the top-up fails without a charge",
            ["Open Wallet > Top up", "Enter 50", "Wait on the 3-D Secure page for two minutes", "Approve"],
        ),
        QR: _bug(
            "Crash when scanning a QR code in landscape",
            "The app crashes when the camera view rotates",
            "The scanner keeps working in landscape",
            ["Open Scan", "Rotate the phone to landscape"],
        ),
        LOGIN: _bug(
            "Fingerprint login unlocks the app after the fingerprint was removed from the device",
            "The app unlocks with a fingerprint that was deleted in the system settings",
            "The app asks for the PIN after the enrolled fingerprints change",
            ["Enable fingerprint login", "Delete the fingerprint in Settings", "Add a new one", "Open the app"],
        ),
        PUSH: _bug(
            "Notifications show another user's payment after switching accounts",
            "The notification names the payments of the account logged out before",
            "Only the current account's payments are notified",
            ["Log in as user A", "Log out", "Log in as user B", "Have user A receive money"],
        ),
    },
    {
        "severity": "high",
        SEND: _bug(
            "Send button stays disabled after correcting an invalid IBAN",
            "The Send button stays grey after the IBAN is fixed",
            "The Send button is enabled",
            ["Open Send > To IBAN", "Enter DE00 1234", "Correct it to a valid IBAN"],
        ),
        TOPUP: _bug(
            "Saved card disappears from the top-up screen after an app update",
            "No saved card is listed; the card has to be added again",
            "The saved card is still listed",
            ["Save a card", "Update the app from the store", "Open Wallet > Top up"],
        ),
        QR: _bug(
            "Scanner does not read QR codes on a dark background",
            "The camera view shows the code but nothing happens",
            "The payment sheet opens",
            ["Open Scan", "Point the camera at a white-on-black QR code"],
        ),
        LOGIN: _bug(
            "Face ID prompt appears twice on app start",
            "The Face ID prompt shows, succeeds, and shows again",
            "One Face ID prompt",
            ["Enable Face ID login", "Close the app", "Open the app"],
        ),
        PUSH: _bug(
            "Tapping a payment notification opens the home screen instead of the payment",
            "The home screen opens",
            "The payment's details open",
            ["Receive money while the app is closed", "Tap the notification"],
        ),
    },
    {
        "severity": "low",
        SEND: _bug(
            "Amount field accepts three decimal places",
            "10.555 can be typed and is rounded silently",
            "Only two decimals can be typed",
            ["Open Send", "Type 10.555"],
        ),
        TOPUP: _bug(
            "Top-up amount keypad has no decimal separator on German locale",
            "Only whole euros can be entered",
            "A comma key is shown",
            ["Set the phone to German", "Open Wallet > Top up"],
        ),
        QR: _bug(
            "Flashlight stays on after leaving the scanner",
            "The flashlight keeps burning on the home screen",
            "The flashlight turns off",
            ["Open Scan", "Turn on the flashlight", "Tap Back"],
        ),
        LOGIN: _bug(
            "PIN dots misaligned on small screens",
            "The fourth dot is cut off",
            "All dots are visible",
            ["Open the app on a 4.7 inch screen"],
        ),
        PUSH: _bug(
            "Notification amount shows the currency code twice", "'EUR 25.00 EUR'", "'25.00 EUR'", ["Receive 25 EUR"]
        ),
    },
    {
        "severity": "visual",
        SEND: _bug(
            "Contact avatars are stretched in the recent contacts row",
            "Avatars are oval",
            "Avatars are round",
            ["Open Send"],
        ),
        TOPUP: _bug(
            "Card logo overlaps the card number on the top-up screen",
            "The Visa logo covers the last digits",
            "Logo and number side by side",
            ["Open Wallet > Top up"],
        ),
        QR: _bug(
            "Scanner frame is off-centre on tablets",
            "The frame sits in the upper left",
            "The frame is centred",
            ["Open Scan on a tablet"],
        ),
        LOGIN: _bug(
            "Dark mode: the 'Use PIN instead' link is unreadable",
            "Dark grey on black",
            "Readable contrast",
            ["Turn on dark mode", "Open the app"],
        ),
        PUSH: _bug(
            "Notification settings toggles jump when scrolled",
            "The toggles flicker",
            "Smooth scrolling",
            ["Open Settings > Notifications", "Scroll"],
        ),
    },
]
