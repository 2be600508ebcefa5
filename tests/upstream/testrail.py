"""TestRail (API v2) on loopback, as its documentation describes it.

Routes sit in the query string (`index.php?/api/v2/get_cases/3&limit=250`;
tests/upstream/server.py turns them into `request.path` and
`request.query`). Basic auth with the user's e-mail and API key; every
request must say `Content-Type: application/json`. Errors are
`{"error": "..."}`: 401 for bad credentials, 400 for an unknown project or
suite or a multi-suite project asked without `suite_id`.

Bulk methods (get_cases, get_sections) answer TestRail 6.7+'s wrapper:
`offset`, `limit`, `size`, `_links.next/prev` (path-style links carrying the
request's filters) and the items; `paged=False` is a server before 6.7,
answering a bare array of everything. get_suites answers a bare array
(`suites_paged=True`: 9.3.1+). A page holds at most `page_cap` items (250,
like TestRail; tests lower it to make pages of 30 cases). Cases come in the
order of their sections and their place in them, not by update time;
`updated_after` keeps those updated after the given epoch second; a deleted
case simply leaves every listing. Times are epoch seconds from `clock`.

`catalog()` is Parcelpoint, a parcel-locker app: 31 cases in 8 sections
(Steps, Text and Exploratory templates), some edited after they were written.
"""

import re
from urllib.parse import urlencode

from .server import Request, Response, Upstream

UNAUTHORIZED = "Authentication failed: invalid or missing user/password or session cookie."
NO_PROJECT = "Field :project_id is not a valid or accessible project."
NO_SUITE = "Field :suite_id is not a valid test suite."
SUITE_REQUIRED = "Field :suite_id is a required field."
NO_CASE = "Field :case_id is not a valid test case."
CONTENT_TYPE = "Content-Type header missing (use Content-Type: application/json)"
TEMPLATES = {"text": 1, "steps": 2, "exploratory": 3}
CUSTOM = (
    "custom_automation_type",
    "custom_preconds",
    "custom_steps",
    "custom_expected",
    "custom_steps_separated",
    "custom_mission",
    "custom_goals",
)


class FakeTestRail(Upstream):
    def __init__(
        self,
        *,
        user: str = "qa-bot@parcelpoint.example",
        api_key: str = "tr-4f9c2e1d7b",
        project_id: int = 3,
        project_name: str = "Parcelpoint",
        suite_mode: int = 1,
        first_suite: str = "Master",
        paged: bool = True,
        suites_paged: bool = False,
    ):
        super().__init__()
        self.user, self.api_key = user, api_key
        self.paged, self.suites_paged = paged, suites_paged
        self.page_cap = 250
        self.project_id = project_id
        self.projects = {
            project_id: {
                "id": project_id,
                "name": project_name,
                "announcement": f"{project_name}: regression and release tests",
                "show_announcement": True,
                "is_completed": False,
                "completed_on": None,
                "suite_mode": suite_mode,
                "default_role_id": 3,
                "default_role": "Tester",
                "users": [],
                "groups": [],
            }
        }
        self.suites: dict[int, dict] = {}
        self.sections: dict[int, dict] = {}
        self.cases: dict[int, dict] = {}
        self._ids = {"suite": 0, "section": 0, "case": 1200}
        self._order = 0
        self.suite = self.add_suite(first_suite)

    # -- data ------------------------------------------------------------------------------------------

    def _next(self, what: str) -> int:
        self._ids[what] += 1
        return self._ids[what]

    def stamp(self, minutes: float = 1) -> int:
        return int(self.tick(minutes).timestamp())

    def add_suite(self, name: str, *, baseline: bool = False) -> dict:
        suite_id = self._next("suite")
        suite = {
            "id": suite_id,
            "name": name,
            "description": None,
            "project_id": self.project_id,
            "is_master": not baseline and not self.suites,
            "is_baseline": baseline,
            "is_completed": False,
            "completed_on": None,
            "url": f"{self.url}/index.php?/suites/view/{suite_id}",
        }
        self.suites[suite_id] = suite
        return suite

    def add_section(
        self, name: str, *, parent: dict | None = None, suite: dict | None = None, description: str | None = None
    ) -> dict:
        self._order += 1
        section = {
            "id": self._next("section"),
            "suite_id": (suite or self.suite)["id"],
            "name": name,
            "description": description,
            "parent_id": parent["id"] if parent else None,
            "display_order": self._order,
            "depth": parent["depth"] + 1 if parent else 0,
        }
        self.sections[section["id"]] = section
        return section

    def add_case(
        self,
        section: dict,
        title: str,
        *,
        steps: list[tuple[str, str]] | None = None,
        text: str | None = None,
        expected: str | None = None,
        preconds: str | None = None,
        mission: str | None = None,
        goals: str | None = None,
        refs: str | None = None,
        priority: int = 2,
        minutes: float = 7,
    ) -> dict:
        template = "exploratory" if mission else "steps" if steps is not None else "text"
        created = self.stamp(minutes)
        case = {
            "id": self._next("case"),
            "title": title,
            "section_id": section["id"],
            "template_id": TEMPLATES[template],
            "type_id": 7 if template == "exploratory" else 6,
            "priority_id": priority,
            "milestone_id": None,
            "refs": refs,
            "created_by": 1,
            "created_on": created,
            "updated_by": 1,
            "updated_on": created,
            "estimate": None,
            "estimate_forecast": "3m 20s",
            "suite_id": section["suite_id"],
            "display_order": sum(c["section_id"] == section["id"] for c in self.cases.values()) + 1,
            "is_deleted": 0,
            **dict.fromkeys(CUSTOM),
        }
        case["custom_automation_type"] = 0
        case["custom_preconds"] = preconds
        if template == "steps":
            case["custom_steps_separated"] = [
                {"content": content, "expected": result, "additional_info": None, "refs": None}
                for content, result in steps
            ]
        elif template == "text":
            case["custom_steps"], case["custom_expected"] = text, expected
        else:
            case["custom_mission"], case["custom_goals"] = mission, goals
        self.cases[case["id"]] = case
        return case

    def edit(self, case_id: int, *, minutes: float = 1, **fields) -> dict:
        """Change a case the way the UI does: the fields, then updated_on and updated_by."""
        case = self.cases[case_id]
        for name, value in fields.items():
            if name == "steps":
                name, value = (
                    "custom_steps_separated",
                    [
                        {"content": content, "expected": result, "additional_info": None, "refs": None}
                        for content, result in value
                    ],
                )
            case[name] = value
        case["updated_on"], case["updated_by"] = self.stamp(minutes), 2
        return case

    def delete(self, case_id: int) -> None:
        del self.cases[case_id]

    def section(self, name: str) -> dict:
        return next(section for section in self.sections.values() if section["name"] == name)

    def case(self, title: str) -> dict:
        return next(case for case in self.cases.values() if case["title"] == title)

    def listing(self, suite_id: int | None = None) -> list[dict]:
        """The cases of the project (of a suite), in TestRail's order: by section, then place."""
        cases = [c for c in self.cases.values() if suite_id is None or c["suite_id"] == suite_id]
        return sorted(
            cases, key=lambda c: (self.sections[c["section_id"]]["display_order"], c["display_order"], c["id"])
        )

    # -- the API ---------------------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        if request.basic_auth() != (self.user, self.api_key):
            return Response(401, {"error": UNAUTHORIZED})
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return Response(400, {"error": CONTENT_TYPE})
        match = re.fullmatch(r"/api/v2/(\w+)(?:/(\d+))?", request.path)
        handler = getattr(self, f"api_{match.group(1)}", None) if match else None
        if handler is None or match.group(2) is None:
            return Response(404, {"error": f"Unknown method '{request.path}'"})
        return handler(request, int(match.group(2)))

    def api_get_project(self, request: Request, project_id: int) -> Response:
        if project_id not in self.projects:
            return Response(400, {"error": NO_PROJECT})
        project = self.projects[project_id]
        return Response(200, {**project, "url": f"{self.url}/index.php?/projects/overview/{project_id}"})

    def api_get_suites(self, request: Request, project_id: int) -> Response:
        if project_id not in self.projects:
            return Response(400, {"error": NO_PROJECT})
        suites = list(self.suites.values())
        if self.paged and self.suites_paged:
            return self.page(request, f"get_suites/{project_id}", "suites", suites)
        return Response(200, suites)

    def api_get_sections(self, request: Request, project_id: int) -> Response:
        suite, problem = self.scope(request, project_id)
        if problem:
            return problem
        sections = sorted(
            (s for s in self.sections.values() if suite is None or s["suite_id"] == suite),
            key=lambda s: s["display_order"],
        )
        return self.page(request, f"get_sections/{project_id}", "sections", sections)

    def api_get_cases(self, request: Request, project_id: int) -> Response:
        suite, problem = self.scope(request, project_id)
        if problem:
            return problem
        cases = self.listing(suite)
        if "updated_after" in request.query:
            try:
                after = int(request.query["updated_after"])
            except ValueError:
                return Response(400, {"error": "Field :updated_after is not a valid date."})
            cases = [case for case in cases if case["updated_on"] > after]
        return self.page(request, f"get_cases/{project_id}", "cases", cases)

    def api_get_case(self, request: Request, case_id: int) -> Response:
        if case_id not in self.cases:
            return Response(400, {"error": NO_CASE})
        return Response(200, self.cases[case_id])

    def scope(self, request: Request, project_id: int) -> tuple[int | None, Response | None]:
        """The suite a bulk method reads: required in a multi-suite project."""
        if project_id not in self.projects:
            return None, Response(400, {"error": NO_PROJECT})
        if "suite_id" not in request.query:
            if self.projects[project_id]["suite_mode"] == 3:
                return None, Response(400, {"error": SUITE_REQUIRED})
            return None, None
        suite = int(request.query["suite_id"]) if request.query["suite_id"].isdigit() else 0
        if suite not in self.suites:
            return None, Response(400, {"error": NO_SUITE})
        return suite, None

    def page(self, request: Request, route: str, key: str, items: list[dict]) -> Response:
        if not self.paged:
            return Response(200, items)
        try:
            limit, offset = int(request.query.get("limit", 250)), int(request.query.get("offset", 0))
        except ValueError:
            return Response(400, {"error": "Field :limit is not a valid integer."})
        if limit < 1 or offset < 0:
            return Response(400, {"error": "Field :limit must be a positive integer."})
        limit = min(limit, self.page_cap)
        page = items[offset : offset + limit]
        filters = {name: value for name, value in request.query.items() if name not in ("limit", "offset")}

        def link(start: int) -> str:
            return f"/api/v2/{route}&" + urlencode({**filters, "limit": limit, "offset": start})

        return Response(
            200,
            {
                "offset": offset,
                "limit": limit,
                "size": len(page),
                "_links": {
                    "next": link(offset + limit) if offset + limit < len(items) else None,
                    "prev": link(max(0, offset - limit)) if offset else None,
                },
                key: page,
            },
        )

    # -- Parcelpoint -----------------------------------------------------------------------------------

    @classmethod
    def catalog(cls, **options) -> "FakeTestRail":
        tr = cls(**options)
        sign_in = tr.add_section("Sign-in", description="Accounts, one-time codes and sessions")
        sms = ("Open the app, tap Sign in, enter the phone number and the SMS code", "The parcel list opens")
        tr.add_case(
            sign_in,
            "Sign in with a one-time code sent by SMS",
            refs="PP-101",
            preconds="A registered account with a verified phone number",
            steps=[
                ("Open the app and tap Sign in", "The phone number screen opens"),
                ("Enter +44 7700 900123 and tap Send code", "An SMS with a 6-digit code arrives within 30 s"),
                ("Enter the code", "The parcel list opens"),
            ],
        )
        tr.add_case(
            sign_in,
            "A one-time code expires after 10 minutes",
            steps=[
                ("Request a sign-in code", "The SMS arrives"),
                ("Wait 10 minutes, then enter the code", "'This code has expired' is shown with Send a new code"),
            ],
        )
        tr.add_case(
            sign_in,
            "Five wrong codes lock sign-in for 15 minutes",
            priority=3,
            steps=[
                ("Request a sign-in code", "The SMS arrives"),
                ("Enter a wrong code five times", "'Too many attempts, try again in 15 minutes' is shown"),
                ("Enter the right code", "Sign-in is still refused"),
            ],
        )
        tr.add_case(
            sign_in,
            "The session survives an app restart",
            preconds="Signed in on Android 14",
            text="1. Force-close the app from Recents\n2. Open the app again",
            expected="The parcel list opens without asking for a code",
        )
        lockers = tr.add_section("Locker map", description="Finding a locker and its opening hours")
        tr.add_case(
            lockers,
            "Nearest lockers are listed by walking distance",
            preconds="Location permission granted",
            steps=[
                ("Open the Lockers tab", "A map centred on the current position is shown"),
                ("Tap List", "Lockers are listed nearest first, with the walking time"),
            ],
        )
        tr.add_case(
            lockers,
            "A locker under maintenance is greyed out on the map",
            refs="PP-214",
            steps=[
                ("Open the Lockers tab near locker KX-4410, which is under maintenance", "Its pin is grey"),
                ("Tap its pin", "'Temporarily unavailable' is shown and it cannot be chosen for a delivery"),
            ],
        )
        tr.add_case(
            lockers,
            "Opening hours of an indoor locker",
            preconds="Locker SB-0032 inside Southbank station",
            text="1. Open the locker's page\n2. Read the opening hours",
            expected="The station's hours are shown (05:30-00:30), not 24/7",
        )
        tr.add_case(
            lockers,
            "Explore the map with location permission denied",
            mission="Find a locker without sharing the location",
            goals="Search by postcode works\nNo screen keeps asking for the permission\nThe map is usable",
        )
        pickup = tr.add_section("Parcel pickup", description="Collecting a parcel at the locker")
        tr.add_case(
            pickup,
            "A parcel ready for pickup shows its locker and deadline",
            steps=[
                ("Open the parcel list", "The parcel shows 'Ready for pickup'"),
                ("Open the parcel", "The locker address, the compartment size and the pickup deadline are shown"),
            ],
        )
        tr.add_case(
            pickup,
            "The pickup deadline is extended once by 24 hours",
            text="- Open a parcel ready for pickup\n- Tap Extend by 24 h\n- Tap Extend again",
            expected="The deadline moves 24 hours later once; the second time 'Already extended' is shown",
        )
        qr = tr.add_section("QR code", parent=pickup, description="Opening a compartment by scanning the app's code")
        tr.add_case(
            qr,
            "Open a compartment by scanning the QR code",
            refs="PP-88",
            steps=[
                (sms[0], sms[1]),
                ("Open the parcel and tap Show QR code", "A QR code fills the screen"),
                (
                    "Hold the phone under the locker's scanner",
                    "The compartment door opens and the parcel shows Collected",
                ),
            ],
        )
        tr.add_case(
            qr,
            "The QR code scans with screen brightness at minimum",
            priority=3,
            steps=[
                ("Set the brightness to the minimum", ""),
                ("Tap Show QR code", "The app raises the brightness to the maximum while the code is shown"),
                ("Scan it at the locker", "The compartment opens"),
            ],
        )
        tr.add_case(
            qr,
            "An expired QR code is refused by the locker",
            steps=[
                ("Take a screenshot of the QR code", ""),
                ("Scan the screenshot at the locker 2 minutes later", "The locker shows 'Code expired' and stays shut"),
            ],
        )
        tr.add_case(
            qr,
            "The QR code refreshes every 60 seconds",
            steps=[
                ("Tap Show QR code and wait 60 seconds", "A new code replaces the old one, without a flicker"),
            ],
        )
        tr.add_case(
            qr,
            "The QR code is shown offline after the parcel list was loaded",
            preconds="The parcel list was opened once online",
            text="1. Turn on airplane mode\n2. Open the parcel\n3. Tap Show QR code",
            expected="The code is shown and opens the compartment",
        )
        pin = tr.add_section("PIN entry", parent=pickup, description="Opening a compartment with the 6-digit PIN")
        tr.add_case(
            pin,
            "Open a compartment with the 6-digit PIN",
            steps=[
                ("Open the parcel and tap Use PIN instead", "A 6-digit PIN is shown"),
                ("Type the PIN on the locker's keypad and press OK", "The compartment door opens"),
            ],
        )
        tr.add_case(
            pin,
            "Three wrong PINs block the keypad for 5 minutes",
            steps=[
                ("Type a wrong PIN three times", "The keypad shows 'Blocked for 5 minutes'"),
                ("Type the right PIN within 5 minutes", "The keypad stays blocked"),
            ],
        )
        tr.add_case(
            pin,
            "The PIN is read aloud with TalkBack and VoiceOver",
            refs="PP-305",
            steps=[
                ("Turn on TalkBack and open the PIN screen", "The PIN is read digit by digit"),
            ],
        )
        tr.add_case(
            pin,
            "A compartment door left open raises an alert",
            text="1. Open a compartment with the PIN\n2. Take the parcel and leave the door open 60 s",
            expected="The locker beeps and the app asks to close the door",
        )
        returns = tr.add_section("Returns", description="Sending a parcel back from a locker")
        tr.add_case(
            returns,
            "Drop off a return with a prepaid label",
            steps=[
                ("Open Returns and choose the order", "The return's QR code is shown"),
                ("Scan it at the locker", "An empty compartment of the right size opens"),
                ("Put the parcel in and close the door", "'Return dropped off' is shown with a receipt number"),
            ],
        )
        tr.add_case(
            returns,
            "The return label is printed at the locker",
            steps=[
                ("Choose Print the label at the locker", "A short code is shown"),
                ("Type the code on the keypad", "The locker prints the label"),
            ],
        )
        tr.add_case(
            returns,
            "A return to a full locker suggests the nearest one with space",
            steps=[
                ("Start a return at locker KX-4412, which is full", "'No free compartment' is shown"),
                ("Read the suggestion", "The nearest locker with a free compartment is offered, with its distance"),
            ],
        )
        tr.add_case(
            returns,
            "Explore returns of oversized parcels",
            mission="Return a parcel that does not fit the largest compartment",
            goals="The app says where to take it instead\nNo return code is wasted",
        )
        notices = tr.add_section("Notifications", description="Push notifications and reminders")
        tr.add_case(
            notices,
            "A push notification says when a parcel arrives at the locker",
            steps=[
                ("Have a courier deliver a parcel to the locker", "A notification 'Your parcel is at KX-4410' arrives"),
            ],
        )
        tr.add_case(
            notices,
            "A reminder comes 24 hours before the pickup deadline",
            steps=[
                ("Leave a parcel uncollected until a day before its deadline", "A reminder notification arrives"),
            ],
        )
        tr.add_case(
            notices,
            "Notifications follow the device language",
            preconds="Device language German",
            text="1. Have a parcel delivered\n2. Read the notification",
            expected="'Ihr Paket ist da' is shown, not the English text",
        )
        tr.add_case(
            notices,
            "Tapping the arrival notification opens the parcel",
            steps=[
                ("Tap the arrival notification", "The app opens on that parcel, not on the parcel list"),
            ],
        )
        payments = tr.add_section("Payments", description="Storage and oversize fees")
        tr.add_case(
            payments,
            "Pay the storage fee with a saved card",
            preconds="A parcel past its free storage days",
            steps=[
                ("Open the parcel", "'Storage fee £1.50' is shown"),
                ("Tap Pay and confirm with the saved Visa card", "The payment succeeds; the QR code shows"),
            ],
        )
        tr.add_case(
            payments,
            "A declined card shows the bank's reason",
            steps=[
                ("Pay the storage fee with card 4000 0000 0000 0002", "'Your card was declined' is shown"),
            ],
        )
        tr.add_case(
            payments,
            "A receipt is e-mailed after paying an oversize fee",
            steps=[
                ("Pay an oversize fee", "The payment succeeds"),
                ("Open the account's mailbox", "A receipt with the parcel number and VAT arrives"),
            ],
        )
        tr.add_case(
            payments,
            "A storage fee is refunded after a locker fault",
            preconds="A paid storage fee; locker KX-4410 reported faulty",
            text="1. Open the parcel\n2. Tap Report a problem > The locker did not open",
            expected="The fee is refunded to the card within 5 days and the app says so",
        )
        # Edits after the cases were written: the listing is not in the order of updated_on.
        tr.edit(
            tr.case("Sign in with a one-time code sent by SMS")["id"],
            minutes=90,
            title="Sign in with a one-time code sent by SMS or WhatsApp",
        )
        tr.edit(
            tr.case("Nearest lockers are listed by walking distance")["id"],
            minutes=30,
            custom_preconds="Location permission granted; at least 3 lockers within 2 km",
        )
        return tr
