"""Realistic, deterministic demo data for the QA knowledge search service.

``generate(records, seed)`` yields products, features, test cases and bugs as
plain dicts in the JSON-Lines interchange format (FORMAT.md), ready for
``backlog.interchange.dumps``. It feeds ``manage.py seed_demo``, the demo
database behind the UI and the import benchmarks.

The text is built from hand-written vocabularies: eight fictional products of
different types (mobile app, web apps, point of sale, maps SDK, TV app, hub
firmware, payroll API), each with its own features, screens, platforms and
environments, combined with failure modes, contexts and many sentence
templates, so that searching it feels like searching a real tracker. About 8%
of bugs are paraphrased duplicates of an earlier bug of the same feature
(``raw_data["duplicate_of"]`` names the original) for duplicate detection.

Output depends only on ``(records, seed)``: one ``random.Random(seed)`` drives
everything; no clock, ``hash()`` or set order is involved. It is a generator
with flat memory and runs at well over 40,000 records/s on one core.
"""

import copy
import random
from bisect import bisect
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import accumulate

__all__ = ["generate"]

# --------------------------------------------------------------------------
# Time window
# --------------------------------------------------------------------------
_UTC = UTC
START = int(datetime(2024, 11, 1, tzinfo=_UTC).timestamp())
END = int(datetime(2026, 11, 15, tzinfo=_UTC).timestamp())
DAY = 86400

SEVERITIES = ("critical", "high", "medium", "low")

# --------------------------------------------------------------------------
# Products and their features
# --------------------------------------------------------------------------
# A feature is (name, component, where, object, tags, description,
# "act|act ~ outcome|act ~ outcome", "step|step|...", expected outcome).
# `where` is the screen, page or endpoint; acts are imperative phrases that
# fit "When I {act}": the first one goes with the steps and the expected
# outcome, the others carry their own outcome after "~". Tags (money, time,
# list, form, sync, notify, media) decide which failure modes make sense.

PRODUCTS = [
    dict(
        name="Tramline Mobile",
        plat="mobile",
        cur="€",
        prefix="TRM",
        ver=(5, 2),
        weight=18,
        desc="Mobile ticketing app for the Tramline regional transit network: buy single tickets and "
        "season passes, plan journeys with live departures and show tickets offline to inspectors. "
        "iOS and Android.",
        persona="a rider with a verified account and a saved Visa card",
        setup=(
            "Install the latest Tramline Mobile build from TestFlight or the internal test track",
            "Sign in as qa.rider03@tramline.test",
            "Allow location access when prompted",
        ),
        scopes=(
            "student riders",
            "family accounts",
            "Harbour City region",
            "Wear OS and watchOS",
            "night network",
            "group bookings",
            "contactless bank cards",
            "screen reader users",
        ),
        features=[
            (
                "Season pass renewal",
                "Ticketing",
                "Passes screen",
                "season pass",
                "money,time",
                "Riders renew weekly, monthly and annual passes in the app, before or after expiry, with a "
                "saved card or wallet.",
                "renew an expired season pass with a saved card|renew a monthly pass before it expires ~ the "
                "new period starts the day after the current pass expires|upgrade a monthly pass to annual at "
                "renewal ~ the annual pass replaces the monthly one and the unused days are credited",
                "Open the Passes tab|Select the expiring Zone 1-2 monthly pass|Tap Renew|Choose the saved Visa "
                "ending 4242|Confirm with Face ID or the app PIN",
                "the pass validity is extended by one period and a receipt is emailed",
            ),
            (
                "Offline ticket wallet",
                "Wallet",
                "Wallet screen",
                "ticket",
                "sync,time",
                "Purchased tickets and passes are stored on the device so they can be shown and activated "
                "without a network connection.",
                "show a purchased ticket without network|activate a single ticket in airplane mode ~ the "
                "ticket activates offline and the activation syncs once the phone is back online|open the "
                "wallet after seven days offline ~ every valid ticket is still shown and expired ones are "
                "greyed out",
                "Buy a single Zone 1 ticket while online|Force-quit the app|Enable airplane mode|Open the "
                "Wallet tab|Tap the ticket and swipe to activate",
                "the ticket renders from local storage with a live countdown and the animated security band",
            ),
            (
                "Single ticket purchase",
                "Ticketing",
                "Buy Tickets screen",
                "single ticket",
                "money,form",
                "Quick purchase flow for single, return and day tickets with zone selection and concession fares.",
                "buy a single adult ticket for zones 1-2|buy two concession tickets in one order ~ both "
                "tickets are issued at the concession fare in one order|buy a day ticket with a promo code ~ "
                "the promo discount is applied and shown on the receipt",
                "Open Buy Tickets|Select Single, Adult, Zones 1-2|Tap Continue to payment|Pay with the saved card",
                "the ticket appears in the wallet within five seconds and the order is listed in Purchase history",
            ),
            (
                "Journey planner",
                "Planner",
                "Plan Journey screen",
                "route",
                "list,time",
                "Door-to-door journey planning across tram, bus and ferry with live delays and step-free options.",
                "plan a journey from Central Station to Harbour Point|plan a journey that departs tomorrow at "
                "07:30 ~ routes follow tomorrow's timetable with departures from 07:30|plan a step-free route "
                "with a buggy ~ only routes with lifts, ramps and low-floor vehicles are offered",
                "Open Plan Journey|Enter Central Station as the origin|Enter Harbour Point as the "
                "destination|Set the departure time to tomorrow 07:30|Tap Search",
                "up to five routes are listed, sorted by arrival time, with live delays shown in red",
            ),
            (
                "Live departures board",
                "Planner",
                "Departures screen",
                "departure",
                "list,time,sync",
                "Real-time departures for a stop, refreshed every 30 seconds from the AVL feed, with platform "
                "and disruption badges.",
                "view live departures for a favourite stop|filter departures by tram line ~ only departures of "
                "the chosen line are listed|refresh departures after a delay is announced ~ the delayed "
                "service shows the new expected time and a delay badge",
                "Open the Departures tab|Search for the stop Market Square|Add it to favourites|Filter by line "
                "T4|Pull down to refresh",
                "departures refresh within 30 seconds and delayed services show the new expected time",
            ),
            (
                "Refund to original card",
                "Payments",
                "Purchase History screen",
                "refund",
                "money,notify",
                "Riders request refunds for unused tickets; approved refunds go back to the original card or wallet.",
                "request a refund for an unused day ticket|refund a partly used carnet to the original card ~ "
                "the unused journeys are refunded pro rata to the original card|cancel a pending refund "
                "request ~ the request is withdrawn and the ticket can be used again",
                "Open Account > Purchase history|Select an unused day ticket bought today|Tap Request "
                "refund|Choose the reason Bought by mistake|Submit the request",
                "the refund is approved at once, the ticket leaves the wallet and the amount goes back to the "
                "original card",
            ),
            (
                "Family account sharing",
                "Account",
                "Family screen",
                "family member",
                "form,sync",
                "A primary account holder invites up to five family members and buys or transfers tickets to "
                "their phones.",
                "invite a family member by email|transfer a day ticket to a family member ~ the family member "
                "sees the ticket within ten seconds and it leaves the sender's wallet|remove a family member "
                "who still holds active tickets ~ the app warns about the active tickets and moves them back "
                "to the primary account",
                "Open Account > Family|Tap Invite member|Enter junior.qa@tramline.test|Accept the invite on "
                "the second phone",
                "the invite is accepted and the new member appears under Family on both phones",
            ),
            (
                "Fare capping",
                "Payments",
                "Fare Cap card",
                "daily fare cap",
                "money,time",
                "Pay-as-you-go journeys are capped per day and per week; riders see their progress towards the "
                "cap on the home screen.",
                "take four pay-as-you-go journeys in one day|check progress towards the weekly cap ~ the Fare "
                "Cap card shows what was spent this week and what is left until the weekly cap|ride across "
                "midnight on a capped day ~ a journey that starts before midnight counts towards the day it "
                "started",
                "Enable pay-as-you-go in the Wallet|Tap in and out on four Zone 1 journeys|Open the Home "
                "screen|Check the Fare Cap card",
                "the rider is never charged more than the daily cap of €7.40 and the card shows the cap as reached",
            ),
            (
                "Ticket inspection QR code",
                "Wallet",
                "Ticket Detail screen",
                "QR code",
                "time",
                "Tickets show a rotating signed QR code that inspectors scan with the Tramline Inspect handheld.",
                "show a QR code to an inspector|scan an activated ticket with the inspection handheld ~ the "
                "handheld shows VALID with the ticket type and expiry time|validate a ticket whose QR code "
                "rotates during the scan ~ the handheld still accepts the ticket because the previous code "
                "stays valid for 30 seconds",
                "Activate a single ticket|Open the Ticket Detail screen|Raise the screen brightness when "
                "prompted|Scan the QR code with the Tramline Inspect handheld",
                "the handheld shows VALID with the ticket type and expiry time",
            ),
            (
                "Service disruption alerts",
                "Notifications",
                "Alerts screen",
                "disruption alert",
                "notify,time",
                "Push and in-app alerts for planned works and live disruptions on the lines and stops a rider follows.",
                "follow line T4 and receive a disruption alert|open a disruption alert from a push "
                "notification ~ the alert detail opens with the affected stops and an alternative route|mute "
                "alerts for a weekend ~ no alerts arrive during the muted period and they resume on Monday",
                "Open Alerts settings|Follow line T4 and the stop Market Square|Publish a test disruption from "
                "the CMS|Tap the push notification",
                "a push arrives within one minute and opens the alert detail with the affected stops",
            ),
        ],
    ),
    dict(
        name="Ledgerly",
        plat="web",
        cur="$",
        prefix="LDG",
        ver=(3, 4),
        weight=16,
        desc="Web invoicing and accounts-receivable app for small businesses and freelancers: recurring "
        "invoices, "
        "online card and ACH payments, reminders, multi-currency and tax rules.",
        persona="an account owner on the Growth plan",
        setup=(
            "Sign in to staging as owner@northwind-demo.test",
            "Switch to the workspace Northwind Studio",
            "Make sure the Stripe test account is connected",
        ),
        scopes=(
            "EU workspaces",
            "accountant access",
            "Growth plan",
            "mobile web",
            "QuickBooks sync",
            "API customers",
            "Canadian tax",
            "enterprise workspaces",
        ),
        features=[
            (
                "Recurring invoices",
                "Invoicing",
                "Recurring Invoices page",
                "recurring invoice",
                "money,time",
                "Schedule invoices that are generated and emailed automatically on a weekly, monthly or custom cycle.",
                "create a monthly recurring invoice for a retainer client|pause a recurring schedule for one "
                "cycle ~ the next invoice is skipped and the schedule resumes the cycle after|change the "
                "amount of a recurring invoice from next month ~ the current invoice keeps the old amount and "
                "the next one uses the new amount",
                "Go to Invoices > Recurring|Click New schedule|Select the client Northwind Studio|Set the "
                "frequency to Monthly on the 1st|Add Design retainer, 1 × $2,400.00 and click Save",
                "the next invoice is generated on the scheduled date and the client receives it by email",
            ),
            (
                "Split payment",
                "Payments",
                "Invoice Payment page",
                "partial payment",
                "money,form",
                "Clients pay an invoice in several parts or with two methods (card and ACH); the balance "
                "updates after each payment.",
                "pay half of an invoice by card and the rest by bank transfer|record a manual partial payment "
                "~ the balance drops by the recorded amount and the status changes to Partly paid|refund one "
                "of two partial payments ~ only the refunded payment is reversed and the balance goes up by "
                "its amount",
                "Open invoice INV-2041 ($1,250.00) from the client link|Choose Pay part of the balance|Enter "
                "$625.00 and pay by card|Pay the remaining balance by ACH",
                "the invoice lists two payments, the balance is $0.00 and the status is Paid",
            ),
            (
                "Invoice PDF export",
                "Documents",
                "Invoice Detail page",
                "invoice PDF",
                "form",
                "Branded PDF export of invoices and quotes with logo, payment instructions and localized "
                "number formats.",
                "download an invoice as PDF|export twenty invoices as a ZIP of PDFs ~ the ZIP holds twenty "
                "PDFs named by invoice number|email an invoice PDF with a custom message ~ the client receives "
                "the email with the custom message and the PDF attached",
                "Open invoice INV-2041|Click More > Download PDF|Open the downloaded file",
                "the PDF matches the on-screen invoice, including logo, line items, tax and payment instructions",
            ),
            (
                "Multi-currency invoices",
                "Invoicing",
                "New Invoice page",
                "exchange rate",
                "money",
                "Invoice clients in their own currency while reporting in the home currency, with daily ECB "
                "rates or a manual rate.",
                "invoice a client in EUR from a USD workspace|override the exchange rate on an invoice ~ the "
                "manual rate is used for the invoice and printed on it|record a GBP payment against a GBP "
                "invoice ~ the invoice is paid in GBP and the exchange gain or loss is recorded",
                "Create an invoice for the client Brightwater GmbH|Set the currency to EUR|Add Consulting, 10 "
                "× €150.00|Save the invoice|Open Reports > Sales by client",
                "the invoice total is in EUR and the report converts it at the rate of the invoice date",
            ),
            (
                "Payment reminders",
                "Automation",
                "Reminders settings page",
                "payment reminder",
                "notify,time",
                "Automatic reminder emails before and after the due date, with a per-client opt-out and a "
                "custom schedule.",
                "send a reminder three days before the due date|stop reminders once the invoice is paid ~ no "
                "further reminders are sent after the payment is recorded|customise the overdue reminder "
                "template ~ overdue reminders use the new wording with every placeholder filled in",
                "Go to Settings > Reminders|Enable Before due date: 3 days|Create an invoice due in 3 days|Run "
                "the reminder job from the admin panel",
                "exactly one reminder email is sent to the client contact and logged on the invoice timeline",
            ),
            (
                "Tax rate rules",
                "Invoicing",
                "Tax Settings page",
                "tax rate",
                "money,form",
                "Configurable tax rates, compound taxes and reverse charge for EU B2B clients, applied per line item.",
                "apply a compound tax to a line item|mark an EU client as reverse charge ~ no VAT is charged "
                "and the invoice shows the reverse-charge note|change a default tax rate without touching old "
                "invoices ~ new invoices use the new rate and existing invoices keep the old one",
                "Go to Settings > Taxes|Add State 6% and County 1.5% (compound)|Create an invoice with a "
                "$100.00 line item|Apply both taxes to the line",
                "the tax lines show $6.00 and $1.59 and the total is $107.59",
            ),
            (
                "Client portal",
                "Portal",
                "Client Portal",
                "client statement",
                "list,sync",
                "A white-labelled portal where clients see open invoices, download statements and pay online.",
                "download a statement for the last quarter|open the client portal from an invoice email ~ the "
                "portal opens for that client and lists the open invoices|pay two invoices at once from the "
                "portal ~ both invoices are marked Paid and one receipt covers both",
                "Open the portal link from the invoice email|Go to Statements|Select Last quarter|Click Download",
                "the statement lists every invoice and payment of the period with a running balance",
            ),
            (
                "Bank reconciliation",
                "Banking",
                "Reconciliation page",
                "bank transaction",
                "list,sync,money",
                "Imports bank feeds and suggests matches between bank transactions and invoices or payments.",
                "match a bank transaction to an open invoice|split one deposit across three invoices ~ the "
                "deposit is matched to all three invoices and each is marked Paid|undo a reconciliation match "
                "~ the transaction returns to Unreconciled and the invoice is unpaid again",
                "Go to Banking > Reconcile|Select the Chase business account|Pick the $3,150.00 deposit from "
                "12 March|Accept the suggested match with INV-2038",
                "the invoice is marked Paid and the transaction moves to the Reconciled tab",
            ),
            (
                "Credit notes",
                "Invoicing",
                "Credit Notes page",
                "credit note",
                "money",
                "Issue full or partial credit notes against an invoice and apply them to later invoices or "
                "refund the client.",
                "issue a partial credit note for an invoice|apply a credit note to a new invoice ~ the new "
                "invoice's balance is reduced by the credit|refund a credit note by card ~ the credit is "
                "refunded to the client's card and the credit note shows as Refunded",
                "Open invoice INV-2041|Click More > Issue credit note|Credit one line item of $200.00|Apply "
                "the credit to the client's next invoice",
                "the client balance drops by $200.00 and both documents reference each other",
            ),
            (
                "Expense import from CSV",
                "Expenses",
                "Import Expenses page",
                "expense line",
                "list,form",
                "Upload bank or card CSV exports, map the columns and import expenses with categories and receipts.",
                "import a card statement CSV with 500 rows|map custom CSV columns to expense fields ~ the "
                "mapping is saved and reused for the next file from the same bank|re-import a file that was "
                "partly imported ~ only the missing rows are imported and no expense is duplicated",
                "Go to Expenses > Import|Upload amex_march.csv|Map the Date, Description, Amount and Category "
                "columns|Click Import",
                "every row is imported once, with correct signs, dates and categories",
            ),
        ],
    ),
    dict(
        name="Counterpoint POS",
        plat="pos",
        cur="£",
        prefix="CPT",
        ver=(8, 9),
        weight=13,
        desc="Point-of-sale system for restaurants and cafés on Windows tills with Verifone card terminals: "
        "orders, table service, split bills, kitchen display and end-of-day cash-up.",
        persona="a cashier on till 2 of the Brixton demo site",
        setup=(
            "Sign in on till 2 with the cashier PIN 4410",
            "Open a new trading day on the demo site",
            "Check that the Verifone terminal shows READY",
        ),
        scopes=(
            "bar tabs",
            "franchise sites",
            "Irish VAT",
            "self-service kiosks",
            "delivery orders",
            "multi-site reporting",
            "training mode",
            "handheld ordering",
        ),
        features=[
            (
                "Split payment",
                "Payments",
                "Payment screen",
                "split bill",
                "money",
                "Split a table's bill evenly, by seat or by item, and take each part with a different tender.",
                "split a bill by item and pay one part by card|split a bill evenly between four guests ~ each "
                "guest pays a quarter and the last share absorbs the rounding penny|split a bill after a "
                "discount was applied ~ the discount is spread across the parts and the parts add up to the "
                "discounted total",
                "Open table 12 with four covers|Tap Pay > Split|Choose Split by item|Assign the two burgers to "
                "guest 1|Take guest 1's payment by card",
                "each part is charged once, the remaining balance updates and the table closes when the last "
                "part is paid",
            ),
            (
                "Refund to original card",
                "Payments",
                "Refund screen",
                "card refund",
                "money",
                "Refund a completed sale in full or in part to the card used, with manager approval above £100.",
                "refund a full sale to the original card|refund one item from a sale paid by card ~ only the "
                "selected item is refunded and the receipt shows the partial refund|refund a sale older than "
                "30 days with manager approval ~ the till asks for a manager PIN and then completes the refund",
                "Open Transactions and search for receipt 0412-0087|Tap Refund|Select the items to "
                "refund|Present the original card on the reader",
                "the refund is approved by the acquirer and a refund receipt is printed",
            ),
            (
                "Table management",
                "Floor",
                "Floor Plan screen",
                "table",
                "sync",
                "Interactive floor plan with table status, covers, merges and transfers between servers.",
                "merge two tables for a large party|transfer a table to another server ~ the table and its "
                "open order move to the new server's list|move an open order to a different table ~ the order "
                "appears on the new table and the old table becomes free",
                "Open the Floor plan|Long-press table 7|Tap Merge and select table 8|Open the merged table on "
                "a second till",
                "both tills show the merged table with one combined order within two seconds",
            ),
            (
                "Kitchen display tickets",
                "Kitchen",
                "Kitchen Display",
                "kitchen ticket",
                "sync,time",
                "Orders are routed to kitchen display screens by station, with course timing and bump-bar support.",
                "send a two-course order to the kitchen|hold mains until the starters are bumped ~ the mains "
                "stay on hold and are fired automatically when the starters are bumped|void an item already "
                "sent to the kitchen ~ the kitchen display marks the item as VOID within two seconds",
                "Create an order with two starters and two mains|Set the mains to Hold|Tap Send|Bump the "
                "starters on the grill station display",
                "the mains reach the kitchen display only after the starters are bumped, with the right timer",
            ),
            (
                "End-of-day cash-up",
                "Back office",
                "Cash-up screen",
                "Z report",
                "money,time",
                "End-of-day close with cash count, card totals from the terminal and a printed Z report.",
                "run the end-of-day close with a cash variance|reprint yesterday's Z report ~ the reprint "
                "matches the original Z report and is marked COPY|close the day while a table is still open ~ "
                "the till warns about the open table and blocks the close until it is settled",
                "Tap Manager > End of day|Count the cash drawer and enter £412.60|Confirm the card totals from "
                "the terminal|Print the Z report",
                "the Z report totals match the sales of the trading day and the variance is recorded",
            ),
            (
                "Offline mode transactions",
                "Payments",
                "Order screen",
                "offline transaction",
                "sync,money",
                "Keeps trading when the internet drops; card payments are stored and forwarded when the "
                "connection returns.",
                "take a card payment while offline|sync offline sales when the connection returns ~ every "
                "offline sale is forwarded once and shows in the back office|void an offline transaction "
                "before it syncs ~ the voided sale is never sent to the acquirer",
                "Unplug the router WAN cable|Ring up a £18.50 sale|Take a contactless card payment|Plug the "
                "WAN cable back in|Open Back office > Pending sync",
                "the offline sale syncs within two minutes and appears once in the back-office sales report",
            ),
            (
                "Discounts and promotions",
                "Pricing",
                "Basket panel",
                "promotion",
                "money,form",
                "Percentage, fixed and bundle promotions (meal deals, happy hour) with scheduling and stacking rules.",
                "apply a happy-hour discount to drinks|ring up a meal deal bundle ~ the meal-deal price "
                "replaces the item prices and the saving is shown|stack a staff discount with a promotion ~ "
                "the staff discount is calculated on the promotional price, as the stacking rule says",
                "Set the till clock inside the 17:00-19:00 happy hour|Add two pints of house lager|Add a meal "
                "deal (main, side, drink)|Open the basket",
                "the happy-hour price and the meal-deal saving are applied once each and shown on the receipt",
            ),
            (
                "Tips on card terminal",
                "Payments",
                "Card terminal prompt",
                "tip",
                "money",
                "Guests add a tip on the Verifone terminal by percentage or custom amount; tips are allocated "
                "to the server.",
                "add a 12.5% tip on the card terminal|enter a custom tip amount ~ the custom tip is added to "
                "the total and assigned to the server|adjust a tip after the payment ~ the tip adjustment "
                "reaches the acquirer before the end-of-day close",
                "Open table 4 with a £64.00 bill|Tap Pay by card|Choose the 12.5% tip on the terminal|Complete "
                "the payment",
                "the receipt shows a tip of £8.00 and a total of £72.00, and the tip is assigned to the server",
            ),
            (
                "Receipt printing",
                "Hardware",
                "Receipt printer",
                "receipt",
                "form",
                "Prints customer and merchant receipts on Epson TM-m30 printers with logo, VAT breakdown and "
                "an e-receipt QR code.",
                "print a customer receipt after a card payment|reprint a receipt from the transaction history "
                "~ the reprint is identical and marked DUPLICATE|email a receipt instead of printing it ~ the "
                "guest receives the e-receipt within a minute and nothing is printed",
                "Complete a £23.40 card sale|Choose Print receipt|Take the receipt from the Epson printer",
                "the receipt shows the logo, every item, the VAT breakdown and the masked card number",
            ),
            (
                "Gift cards",
                "Payments",
                "Gift Card screen",
                "gift card",
                "money",
                "Sell, top up and redeem gift cards, with balance checks and partial redemption.",
                "sell a £50 gift card and redeem part of it|check the balance of a gift card ~ the current "
                "balance and expiry date are shown|top up a gift card by £20 ~ the balance goes up by £20.00 "
                "and the top-up is in the card history",
                "Tap Gift cards > Sell|Scan gift card 6031 4420 0007|Load £50.00 and take the payment in "
                "cash|Redeem the card against a £32.00 bill",
                "the balance after redemption is £18.00 and both transactions are in the gift card history",
            ),
        ],
    ),
    dict(
        name="CarePath Patient Portal",
        plat="web",
        cur="$",
        prefix="CPP",
        ver=(2, 7),
        weight=12,
        desc="Patient portal for the Riverside Health network: appointment booking, lab results, secure "
        "messaging "
        "with clinicians, prescription refills and bill pay, in the browser and on mobile web.",
        persona="a patient with two upcoming appointments and an active prescription",
        setup=(
            "Sign in to the UAT portal as test patient Maria Alvarez (MRN 00481273)",
            "Make sure the patient has a verified mobile number",
            "Clear cookies for portal-uat.carepath.test",
        ),
        scopes=(
            "proxy users",
            "Spanish-language patients",
            "pediatrics",
            "behavioral health",
            "Riverside North clinics",
            "mobile web layout",
            "self-pay patients",
            "Epic upgrade",
        ),
        features=[
            (
                "Appointment booking",
                "Scheduling",
                "Book Appointment page",
                "appointment",
                "time,form",
                "Patients book, reschedule and cancel visits with their care team, with real-time availability "
                "per clinic.",
                "book a follow-up appointment with a primary care physician|reschedule an appointment to "
                "another clinic ~ the old slot is released and the new appointment shows the new clinic "
                "address|cancel an appointment less than 24 hours ahead ~ the late-cancellation notice is "
                "shown and the slot is released",
                "Go to Appointments > Schedule|Choose Follow-up visit|Pick Dr. Amara Osei at Riverside "
                "North|Select the first free slot next Tuesday|Click Confirm",
                "the appointment appears under Upcoming with the clinic address and a confirmation email is sent",
            ),
            (
                "Lab results viewer",
                "Results",
                "Test Results page",
                "lab result",
                "list,time",
                "Released lab results with reference ranges, trends over time and clinician comments.",
                "open a released lipid panel|view the HbA1c trend over two years ~ the trend chart shows every "
                "HbA1c result of the last two years with dates|download a lab result as PDF ~ the PDF shows "
                "the values, reference ranges and clinician comments",
                "Go to Health > Test Results|Open the lipid panel from last week|Expand LDL cholesterol|Click "
                "View trend",
                "each value shows its unit, reference range and flag, and the trend chart lists every earlier result",
            ),
            (
                "Secure messaging",
                "Messaging",
                "Messages page",
                "message",
                "notify,form",
                "Patients send non-urgent messages to their care team with attachments and get an email when "
                "someone replies.",
                "send a message to the care team with a photo attached|reply to a clinician's message ~ the "
                "reply is added to the same conversation and the clinician is notified|mark a conversation as "
                "resolved ~ the conversation moves to Resolved",
                "Go to Messages > New message|Choose Dr. Amara Osei's team|Select the topic Medication "
                "question|Attach rash.jpg (2.4 MB)|Click Send",
                "the message appears in Sent, the attachment opens and the care team inbox receives it",
            ),
            (
                "Prescription refill requests",
                "Medications",
                "Medications page",
                "refill request",
                "form,notify",
                "Request refills for active prescriptions and pick a pharmacy; the status updates as the "
                "clinician reviews it.",
                "request a refill for an active prescription|change the pharmacy on a refill request ~ the "
                "request shows the new pharmacy and the clinic sees the change|request refills for three "
                "medications at once ~ three separate requests are created and each shows Pending review",
                "Go to Health > Medications|Select Atorvastatin 20 mg|Click Request refill|Choose CVS "
                "Pharmacy, 14 Main St|Submit the request",
                "the request shows as Pending review and reaches the clinic worklist",
            ),
            (
                "Proxy access for caregivers",
                "Account",
                "Proxy Access page",
                "proxy invitation",
                "form,sync",
                "Parents and caregivers get delegated access to a family member's record with configurable "
                "permissions.",
                "invite a caregiver as a proxy|switch to a child's record as a parent ~ the portal switches to "
                "the child's record and shows a banner with the child's name|revoke proxy access ~ the "
                "caregiver loses access immediately",
                "Go to Account > Proxy access|Click Invite someone|Enter caregiver.qa@carepath.test with Full "
                "access|Accept the invite as the caregiver|Switch to the patient from the account menu",
                "the caregiver sees the patient's record with exactly the permissions granted",
            ),
            (
                "Bill pay",
                "Billing",
                "Billing page",
                "statement balance",
                "money,form",
                "View statements by guarantor account and pay balances by card or set up a payment plan.",
                "pay a statement balance by card|set up a three-month payment plan ~ three monthly payments "
                "are scheduled and the first one is taken today|pay a balance for a dependant ~ the "
                "dependant's balance drops to $0.00 and the receipt names the guarantor",
                "Go to Billing|Open the statement dated 1 March ($184.20)|Click Pay now|Enter the test card "
                "4111 1111 1111 1111|Confirm the payment",
                "the balance drops to $0.00 and a receipt is available under Payment history",
            ),
            (
                "Video visit check-in",
                "Telehealth",
                "Video Visit page",
                "video visit",
                "time,media",
                "eCheck-in before a telehealth visit with a camera and microphone test, then the virtual waiting room.",
                "complete eCheck-in for a video visit|join a video visit from the waiting room ~ video and "
                "audio connect within five seconds once the clinician starts the visit|rejoin a video visit "
                "after losing the connection ~ the patient returns to the same visit without repeating "
                "eCheck-in",
                "Open the upcoming video visit|Click Begin eCheck-in|Confirm insurance and medications|Run the "
                "camera and microphone test|Click Join waiting room",
                "the patient lands in the waiting room and the clinician sees them as Arrived",
            ),
            (
                "Intake questionnaires",
                "Scheduling",
                "Questionnaire page",
                "questionnaire",
                "form",
                "Pre-visit questionnaires (PHQ-9, medical history) that are filed to the chart before the appointment.",
                "fill in the PHQ-9 questionnaire before a visit|save a questionnaire and finish it later ~ the "
                "saved answers are still there when the questionnaire is reopened|submit a medical history "
                "form with 20 conditions ~ all 20 conditions are filed to the chart",
                "Open the upcoming appointment|Click Questionnaires|Open PHQ-9|Answer all nine questions|Click Submit",
                "the answers are saved, the score is calculated and the form shows as Completed",
            ),
            (
                "Immunization records export",
                "Records",
                "Immunizations page",
                "immunization record",
                "list,form",
                "View immunizations and download or share an official record as PDF or SMART Health Card QR code.",
                "download the immunization record as PDF|share a SMART Health Card QR code ~ the QR code "
                "verifies in the SMART Health Card verifier app|view the immunizations of a dependant ~ the "
                "dependant's immunizations are listed, not the parent's",
                "Go to Health > Immunizations|Click Download record|Choose PDF|Open the file",
                "the record lists every vaccine with date, lot number and administering site",
            ),
            (
                "Two-factor sign-in",
                "Identity",
                "Sign-in page",
                "verification code",
                "form,time",
                "Sign-in with password plus a one-time code by SMS, email or authenticator app, with trusted devices.",
                "sign in with a code sent by SMS|sign in with an authenticator app ~ the six-digit code from "
                "the app is accepted and the patient reaches the home page|remember this device for 30 days ~ "
                "no code is asked on this device for 30 days",
                "Open the portal sign-in page|Enter the username and password|Choose Text me a code|Enter the "
                "six-digit code|Tick Remember this device",
                "the patient reaches the home page and is not asked for a code again on this device for 30 days",
            ),
        ],
    ),
    dict(
        name="Atlasline Maps SDK",
        plat="sdk",
        cur="$",
        prefix="ATL",
        ver=(11, 0),
        weight=9,
        desc="Native maps SDK for Android and iOS: vector tile rendering, offline packs, geocoding, "
        "clustering "
        "and turn-by-turn navigation for partner apps.",
        persona="a developer running the SDK sample app with a valid access token",
        setup=(
            "Build the SDK sample app from the release branch",
            "Set a valid ATLASLINE_ACCESS_TOKEN",
            "Install the sample app on the test device",
        ),
        scopes=(
            "Jetpack Compose",
            "SwiftUI",
            "Flutter plugin",
            "automotive displays",
            "low-end devices",
            "CarPlay",
            "React Native wrapper",
            "v12 migration",
        ),
        features=[
            (
                "Vector tile rendering",
                "Rendering",
                "MapView",
                "vector tile",
                "media",
                "GPU rendering of vector tiles with styles, labels and 3D buildings at 60 fps.",
                "render the default style at zoom 15 over Lisbon|switch styles at runtime ~ the new style is "
                "applied without a blank frame and annotations are kept|tilt the camera to show 3D buildings ~ "
                "buildings extrude smoothly and the frame rate stays above 55 fps",
                "Launch the SDK sample app|Open the Basic map example|Move the camera to Lisbon, zoom 15|Pan "
                "and zoom continuously for 30 seconds",
                "tiles render without gaps or flicker and the frame rate stays above 55 fps",
            ),
            (
                "Offline map packs",
                "Offline",
                "OfflineManager",
                "offline pack",
                "sync,list",
                "Download regions for offline use with progress, storage quotas and automatic updates.",
                "download an offline pack for a city region|resume a paused offline download ~ the download "
                "continues where it stopped without fetching tiles twice|delete an offline pack to free "
                "storage ~ the pack is removed and the reported storage use drops accordingly",
                "Open the Offline packs example|Draw a region over central Porto|Start the download for zoom "
                "10-16|Wait for 100% and enable airplane mode|Pan around the region",
                "the pack downloads completely and the whole region renders while offline",
            ),
            (
                "Turn-by-turn navigation",
                "Navigation",
                "NavigationView",
                "route guidance",
                "time,notify",
                "Voice-guided navigation with lane guidance, rerouting and ETA updates.",
                "reroute after a missed turn|start turn-by-turn guidance for a driving route ~ guidance starts "
                "and the first manoeuvre is announced within two seconds|switch the voice guidance language ~ "
                "the next instruction is spoken in the new language",
                "Open the Navigation example|Request a driving route from Alfama to Belém|Tap Start|Simulate "
                "the route at 2x speed|Miss the second turn",
                "guidance reroutes within three seconds and the ETA updates",
            ),
            (
                "Geocoding search",
                "Search",
                "SearchEngine",
                "search result",
                "list",
                "Forward and reverse geocoding with autocomplete, proximity bias and category search.",
                "search for an address with autocomplete|reverse-geocode a long-press on the map ~ the nearest "
                "address is returned within 500 ms|search for cafés near the user location ~ the nearest cafés "
                "are listed first with their distance",
                "Open the Search example|Type 'Rua Augusta 2'|Pick the first suggestion|Long-press another "
                "point on the map",
                "suggestions appear within 300 ms and the selected result is centred with its full address",
            ),
            (
                "Marker clustering",
                "Annotations",
                "ClusterLayer",
                "marker cluster",
                "list,media",
                "Clusters thousands of point annotations with animated expansion and custom cluster styling.",
                "cluster 10,000 markers|expand a cluster by tapping it ~ the camera zooms in and the cluster "
                "splits into its markers|update the marker data source while clustered ~ clusters recompute "
                "without flicker and the counts match the new data",
                "Open the Clustering example|Load the 10k bike-docks GeoJSON|Zoom out to level 9|Tap the "
                "largest cluster",
                "clusters show the right counts and expand smoothly into their markers",
            ),
            (
                "Route polyline styling",
                "Annotations",
                "PolylineAnnotation",
                "route polyline",
                "media",
                "Draw routes as styled polylines with gradients, casing and traffic colouring.",
                "draw a route polyline with a gradient|update a polyline while it is animating ~ the polyline "
                "updates without jumping and the animation continues|show traffic colours on a route line ~ "
                "each segment is coloured by its traffic level",
                "Open the Polyline example|Add a route with 2,000 coordinates|Apply the gradient style|Zoom "
                "from level 10 to 17",
                "the polyline follows the roads exactly at every zoom level with a smooth gradient",
            ),
            (
                "Camera animations",
                "Camera",
                "CameraAnimator",
                "camera animation",
                "time",
                "Fly-to, ease-to and follow-user camera animations with cancellation and completion callbacks.",
                "cancel a camera animation with a gesture|fly the camera from Lisbon to Madrid ~ the camera "
                "reaches Madrid at zoom 12 after three seconds and the completion callback fires once|follow "
                "the user location with heading ~ the camera follows the puck and rotates with the heading",
                "Open the Camera example|Call flyTo with Madrid, zoom 12, duration 3 s|Touch the map halfway "
                "through|Check the completion callback",
                "the animation stops as soon as the map is touched and the callback reports cancelled=true",
            ),
            (
                "Location puck and heading",
                "Location",
                "LocationComponent",
                "location puck",
                "time,sync",
                "Shows the device location with an accuracy ring and compass heading, with pluggable location "
                "providers.",
                "show the location puck with compass heading|switch to a custom location provider ~ the puck "
                "uses the positions of the custom provider|track the location in the background ~ updates "
                "continue in the background and stop when tracking ends",
                "Grant precise location permission|Open the Location example|Enable heading mode|Walk around "
                "the block with the device",
                "the puck follows the device smoothly and points in the walking direction",
            ),
            (
                "Traffic layer",
                "Layers",
                "TrafficLayer",
                "traffic tile",
                "sync,time",
                "Live traffic overlay refreshed every minute, with incident markers.",
                "enable the live traffic layer|tap a traffic incident marker ~ a callout shows the incident "
                "type and description|keep traffic refreshing for an hour ~ traffic refreshes every minute for "
                "the whole hour without memory growth",
                "Open the Traffic example|Centre the map on the Madrid M-30|Toggle Live traffic on|Wait two minutes",
                "traffic colours refresh every minute and incidents show their description on tap",
            ),
            (
                "Indoor maps",
                "Layers",
                "IndoorLayer",
                "indoor floor",
                "list",
                "Venue maps for airports and malls with a floor picker and indoor search.",
                "switch floors in an airport venue|search for a shop on another floor ~ the result opens with "
                "the floor picker switched to its floor|show the user's floor automatically ~ the floor picker "
                "follows the floor reported by the indoor positioning provider",
                "Open the Indoor example|Centre on Lisbon Airport Terminal 1|Pick floor 1 in the floor "
                "picker|Search for Gate 14",
                "the floor plan switches at once and the search result opens on the right floor",
            ),
        ],
    ),
    dict(
        name="Reelhouse TV",
        plat="tv",
        cur="$",
        prefix="RHT",
        ver=(3, 12),
        weight=11,
        desc="Video streaming app for smart TVs and streaming sticks (Tizen, webOS, Android TV, tvOS, Fire "
        "TV, "
        "Roku): profiles, continue watching, live channels and 4K HDR playback.",
        persona="a subscriber on the Premium plan with three profiles",
        setup=(
            "Sign in with the test account premium.qa@reelhouse.test",
            "Select the profile Alex on Who's Watching",
            "Check that the TV is on the QA network with 50 Mbps",
        ),
        scopes=(
            "kids profiles",
            "the Roku channel",
            "ad-supported plan",
            "hotel TVs",
            "LATAM catalogue",
            "sports events",
            "2026 home redesign",
            "low-memory devices",
        ),
        features=[
            (
                "Continue watching row",
                "Home",
                "Home screen",
                "resume point",
                "sync,list",
                "Home row with partly watched titles ordered by last watched, synced across devices.",
                "resume a series episode from Continue Watching|remove a title from Continue Watching ~ the "
                "title disappears from the row on every device|resume a film started in the phone app ~ the "
                "film resumes at the position reached on the phone",
                "Watch 10 minutes of Harbour Lights S2E3 in the phone app|Open Reelhouse on the TV with the "
                "same profile|Go to Home|Select the title in Continue Watching",
                "playback resumes within five seconds of the position reached on the phone",
            ),
            (
                "Profile switching",
                "Account",
                "Who's Watching screen",
                "profile",
                "sync,form",
                "Up to five profiles per account with avatars, maturity ratings and an optional profile lock.",
                "switch from an adult to a kids profile|create a new profile with an avatar ~ the new profile "
                "appears on Who's Watching with the chosen avatar|lock a profile with a PIN ~ selecting the "
                "profile asks for the PIN",
                "Press Back until the menu opens|Select Switch profile|Choose the profile Kids|Open Home",
                "the Home screen reloads with the kids catalogue and the kids Continue Watching row",
            ),
            (
                "Subtitles and audio tracks",
                "Player",
                "Player settings panel",
                "subtitle track",
                "media",
                "Subtitle and audio track selection during playback, remembered per profile and per series.",
                "turn on English subtitles during playback|switch the audio track to Spanish 5.1 ~ Spanish 5.1 "
                "audio plays within two seconds without restarting the episode|change the subtitle size and "
                "background ~ subtitles use the new size and background immediately",
                "Start Harbour Lights S1E1|Press Down to open the player settings|Select Subtitles > "
                "English|Resume playback",
                "subtitles appear in sync within one second and stay on for the next episode",
            ),
            (
                "Parental PIN",
                "Account",
                "Parental Controls screen",
                "parental PIN",
                "form",
                "A four-digit PIN protects titles above a chosen maturity rating and profile changes.",
                "set a parental PIN for 16+ titles|play a 16+ title on a PIN-protected profile ~ playback "
                "starts only after the correct PIN is entered|reset a forgotten parental PIN ~ a reset link is "
                "emailed to the account owner and the old PIN stops working",
                "Open Settings > Parental controls|Set the PIN 2580|Set the limit to 16+|Open the 16+ title "
                "Night Harbour and press Play",
                "the PIN prompt appears before playback and a wrong PIN blocks the title",
            ),
            (
                "Live channel guide",
                "Live TV",
                "Guide screen",
                "programme listing",
                "list,time",
                "Electronic programme guide for 80 live channels with seven days of listings and reminders.",
                "set a reminder for an upcoming programme|browse the guide for the next 24 hours ~ listings "
                "load for 24 hours ahead without gaps|tune to a live channel from the guide ~ the channel "
                "starts playing within three seconds",
                "Open Live TV > Guide|Scroll to channel 104 Reelhouse Sports|Move forward to 20:00 "
                "tonight|Select the programme and choose Remind me",
                "listings show the right local start times and the reminder fires five minutes before the start",
            ),
            (
                "Voice search",
                "Search",
                "Search screen",
                "search result",
                "list",
                "Search the catalogue by title, actor or genre with the on-screen keyboard or the voice remote.",
                "search for a title by voice|search by actor name ~ titles with that actor are listed "
                "first|search with a misspelled title ~ the intended title is still the first result",
                "Open Search|Hold the microphone button on the remote|Say Harbour Lights|Release the button "
                "and wait for the results",
                "the series is the first result and the results update while the user types or speaks",
            ),
            (
                "Autoplay next episode",
                "Player",
                "Post-play screen",
                "next episode",
                "time,media",
                "Countdown to the next episode during the credits, with skip intro and skip recap buttons.",
                "let the next episode autoplay at the end credits|skip the intro of an episode ~ playback "
                "jumps to the end of the intro|cancel autoplay from the countdown ~ the countdown stops and "
                "the post-play screen stays open",
                "Play the last two minutes of Harbour Lights S2E3|Wait for the end credits|Watch the 10-second "
                "countdown",
                "the next episode starts at the end of the countdown from the beginning of the episode",
            ),
            (
                "Subscription upgrade",
                "Billing",
                "Plans screen",
                "subscription plan",
                "money,form",
                "Upgrade or downgrade the plan on the TV, or by scanning a QR code and paying on the phone.",
                "upgrade by scanning the QR code with the phone|upgrade from Standard to Premium on the TV ~ "
                "the plan changes to Premium at once and the prorated amount is charged once|downgrade at the "
                "end of the billing period ~ the plan stays Premium until the period ends and then changes to "
                "Standard",
                "Open Settings > Plan|Select Premium ($22.99/month)|Scan the QR code with the phone|Confirm "
                "the payment on the phone",
                "the TV unlocks 4K within 30 seconds and the prorated amount is charged once",
            ),
            (
                "4K HDR playback",
                "Player",
                "Player",
                "video stream",
                "media",
                "Adaptive streaming up to 4K with HDR10 and Dolby Vision on supported devices.",
                "play a 4K HDR title|switch from SDR to HDR content in one session ~ the TV switches to HDR "
                "without a black screen longer than two seconds|play a Dolby Vision title on a supported TV ~ "
                "the TV shows the Dolby Vision badge and playback reaches 2160p",
                "Open the title The Long Coast (4K, Dolby Vision)|Press Play|Open the stats overlay with the "
                "1-1-9 remote sequence|Watch for two minutes",
                "playback reaches 2160p HDR within ten seconds without stalls",
            ),
            (
                "Sign in with TV code",
                "Account",
                "Sign-in screen",
                "activation code",
                "form,time",
                "Sign in by entering an eight-character code on reelhouse.tv/activate or by scanning a QR code.",
                "sign in by entering the TV code on the website|sign in by scanning the QR code ~ the TV signs "
                "in within five seconds of confirming on the phone|sign in after the code has expired ~ the TV "
                "shows a new code and the old one is rejected with a clear message",
                "Open the app signed out|Note the code shown on the TV|Enter the code at reelhouse.tv/activate "
                "on a laptop|Sign in with the test account",
                "the TV signs in within five seconds and opens Who's Watching",
            ),
        ],
    ),
    dict(
        name="Nestwise Hub",
        plat="fw",
        cur="$",
        prefix="NWH",
        ver=(4, 6),
        weight=9,
        desc="Firmware for the Nestwise H2 smart-home hub: Zigbee, Z-Wave and Matter device management, "
        "local "
        "automations and scenes, energy monitoring and over-the-air updates.",
        persona="a homeowner with 14 paired devices and two automations",
        setup=(
            "Flash the hub with the current beta firmware over USB",
            "Factory-reset the hub and claim it in the Nestwise app",
            "Connect the hub to the QA lab Wi-Fi",
        ),
        scopes=(
            "Thread devices",
            "battery sensors",
            "H1 hardware",
            "EU frequency plan",
            "installer mode",
            "large homes",
            "cloud-free mode",
            "Matter 1.3",
        ),
        features=[
            (
                "Zigbee device pairing",
                "Zigbee",
                "Add Device flow",
                "Zigbee device",
                "sync",
                "Pair Zigbee 3.0 lights, plugs and sensors through the app with install codes or permit-join.",
                "pair a Zigbee motion sensor|pair a bulb with an install code ~ the bulb joins with the "
                "install code and responds within one second|re-pair a device that was reset ~ the device "
                "keeps its name, room and automations after re-pairing",
                "Open the Nestwise app > Add device > Zigbee|Put the Aqara motion sensor in pairing mode|Wait "
                "for the hub to find it|Name it Hallway sensor",
                "the device is paired within 60 seconds and reports motion in the app",
            ),
            (
                "Automation rules engine",
                "Automations",
                "Automations page",
                "automation rule",
                "time,form",
                "Local if-this-then-that rules with triggers, conditions and actions that run on the hub.",
                "create an automation that turns on the hallway light on motion after sunset|add a time "
                "condition to an automation ~ the automation only runs inside the time window|disable an "
                "automation for a week ~ the automation does not run for a week and re-enables itself "
                "afterwards",
                "Open Automations > New|Set the trigger Hallway sensor detects motion|Add the condition After "
                "sunset|Add the action Hallway light on at 40%|Save and walk past the sensor",
                "the light turns on within 500 ms, without a cloud round trip",
            ),
            (
                "Over-the-air updates",
                "System",
                "Firmware Update page",
                "firmware update",
                "sync",
                "Staged OTA updates for the hub and its Zigbee devices, with rollback on a failed boot.",
                "install a hub firmware update from the app|update a Zigbee bulb over the air ~ the bulb "
                "reports the new firmware version and keeps its settings|roll back a failed update ~ the hub "
                "boots the previous firmware and reports the failed update",
                "Open Settings > Hub > Firmware|Tap Check for updates|Tap Install on the offered build|Wait "
                "for the hub to reboot",
                "the hub boots the new firmware, keeps every paired device and reports the new version",
            ),
            (
                "Local scenes",
                "Automations",
                "Scenes page",
                "scene",
                "sync",
                "Scenes that set several devices at once, stored and run on the hub even without internet.",
                "create a Movie night scene with six devices|run a scene from a wall switch ~ the scene runs "
                "within two seconds of pressing the switch|edit a scene while it is active ~ the changes are "
                "saved and applied the next time the scene runs",
                "Open Scenes > New scene|Add four lights and two blinds|Save it as Movie night|Run the scene "
                "from the app",
                "all six devices reach their target state within two seconds",
            ),
            (
                "Matter bridge",
                "Matter",
                "Matter Bridge settings",
                "bridged device",
                "sync",
                "Exposes Zigbee and Z-Wave devices to Apple Home, Google Home and Alexa through Matter.",
                "add the hub to Apple Home as a Matter bridge|control a bridged Zigbee plug from Google Home ~ "
                "the plug switches within one second and its state updates in both apps|remove a bridged "
                "device ~ the device disappears from every connected ecosystem",
                "Open Settings > Matter|Tap Pair with another app|Scan the Matter code with Apple Home|Toggle "
                "the Kitchen plug from Apple Home",
                "bridged devices appear in Apple Home and respond within one second",
            ),
            (
                "Energy monitoring",
                "Energy",
                "Energy dashboard",
                "energy reading",
                "list,time",
                "Per-device and whole-home energy readings from smart plugs and meters, with daily and monthly charts.",
                "view today's energy use per device|export last month's energy readings as CSV ~ the CSV holds "
                "hourly readings for every device for the whole month|compare this week with last week ~ the "
                "chart shows both weeks side by side with totals",
                "Pair two smart plugs with metering|Run a 1 kW heater on one plug for an hour|Open the Energy "
                "dashboard|Select Today",
                "the dashboard shows about 1 kWh for the heater plug, in hourly buckets in local time",
            ),
            (
                "Offline schedule execution",
                "Automations",
                "Schedules page",
                "schedule",
                "time",
                "Time-based schedules keep running on the hub's real-time clock when the internet or cloud is down.",
                "run a 06:30 weekday schedule without internet|run a sunrise schedule after a power cut ~ the "
                "hub restores its clock and the schedule runs at sunrise|change a schedule while offline ~ the "
                "change is kept and the new time is used without internet",
                "Create a schedule Blinds open at 06:30 on weekdays|Block internet access on the router|Wait "
                "until 06:30",
                "the blinds open at 06:30 local time although the hub is offline",
            ),
            (
                "Z-Wave inclusion",
                "Z-Wave",
                "Add Device flow",
                "Z-Wave device",
                "sync,form",
                "S2-secured inclusion and exclusion of Z-Wave devices, including SmartStart QR codes.",
                "include a Z-Wave lock with S2 security|include a device with SmartStart ~ the device is "
                "included automatically as soon as it is powered on|exclude a device that is no longer in the "
                "house ~ the device is removed from the network and from every automation",
                "Open Add device > Z-Wave|Scan the SmartStart QR code on the lock|Enter the five-digit DSK "
                "when asked|Wait for the interview to finish",
                "the lock is included with S2 Access Control and can be locked from the app",
            ),
            (
                "Backup and restore",
                "System",
                "Backup page",
                "hub backup",
                "sync",
                "Encrypted nightly backups of devices, rules and scenes, restorable to a replacement hub.",
                "restore a backup to a replacement hub|back up the hub to the cloud ~ the backup completes and "
                "shows today's date under Backups|restore a backup taken before a firmware update ~ the hub "
                "warns about the older firmware and restores every device",
                "Open Settings > Backup|Tap Back up now|Claim a second hub|Choose Restore from backup and pick "
                "the latest backup",
                "the replacement hub has every device, automation and scene and devices respond without re-pairing",
            ),
            (
                "Alarm siren control",
                "Security",
                "Security Mode page",
                "siren",
                "notify,time",
                "Arm away or home modes, entry delays and siren control with push alerts to every household member.",
                "trigger the siren after the entry delay|arm the system in Away mode ~ the exit delay counts "
                "down and the system shows Armed away|silence the siren from the app ~ the siren stops within "
                "one second and the event is logged",
                "Open Security|Arm Away|Open the front door after the exit delay|Wait for the 30-second entry delay",
                "the siren sounds at the end of the entry delay and every member gets a push alert",
            ),
        ],
    ),
    dict(
        name="Paystream Payroll API",
        plat="api",
        cur="$",
        prefix="PSP",
        ver=(2, 3),
        weight=12,
        desc="REST API for payroll providers: pay run calculation, tax withholding, payslips, off-cycle "
        "payments, "
        "webhooks and year-end forms for US employers.",
        persona="an API client with the payroll:write scope on the sandbox company Acme Robotics",
        setup=(
            "Get a sandbox token with client credentials (scope payroll:write)",
            "Use the sandbox company Acme Robotics (cmp_7Qx2)",
            "Reset the sandbox data with POST /v2/sandbox/reset",
        ),
        scopes=(
            "multi-state employers",
            "contractors",
            "v3 API",
            "bi-weekly schedules",
            "the partner SDKs",
            "California employers",
            "EOR customers",
            "bulk endpoints",
        ),
        features=[
            (
                "Pay run calculation",
                "Payroll",
                "POST /v2/pay-runs",
                "pay run",
                "money,time",
                "Calculates gross-to-net for every employee of a pay schedule, including taxes, benefits and "
                "deductions.",
                "calculate a bi-weekly pay run for 25 employees|recalculate a pay run after changing an hourly "
                "rate ~ the recalculated pay run uses the new rate for hours worked after the change|preview a "
                "pay run with overtime ~ overtime hours are paid at 1.5 times the regular rate",
                "Create a bi-weekly pay schedule|Add 25 employees with mixed hourly and salaried pay|POST "
                "/v2/pay-runs with the period 1-14 March|GET the pay run until status is calculated",
                "every employee has gross pay, taxes and net pay that match the reference calculator to the cent",
            ),
            (
                "Employee onboarding",
                "Employees",
                "POST /v2/employees",
                "employee record",
                "form",
                "Create employees with personal details, work location, compensation and direct deposit accounts.",
                "create an employee with two direct deposit accounts|update an employee's work address ~ the "
                "new work location is used for state taxes from the next pay run|terminate an employee with a "
                "final pay date ~ the employee is left out of pay runs after the final pay date",
                "POST /v2/employees with the required fields|Add two bank accounts with a 70/30 split|GET the "
                "employee|Check onboarding_status",
                "the employee is created with status onboarding_complete and both accounts are stored",
            ),
            (
                "Tax withholding",
                "Tax",
                "PUT /v2/employees/:id/withholding",
                "withholding",
                "money,form",
                "Federal W-4 and state withholding elections per employee, used by the pay run calculation.",
                "submit a 2020+ W-4 with dependents|set state withholding for a New York employee ~ New York "
                "State and NYC withholding follow the elections|claim exemption from withholding ~ no federal "
                "income tax is withheld while the exemption is valid",
                "PUT the W-4 elections for employee emp_31|Set two dependents under 17|Run a pay run "
                "preview|Compare federal income tax with IRS Publication 15-T",
                "federal withholding matches Publication 15-T for the elections given",
            ),
            (
                "Payslip PDF generation",
                "Documents",
                "GET /v2/payslips/:id/pdf",
                "payslip",
                "money",
                "Renders employee payslips as PDF with year-to-date totals, taxes and deductions.",
                "download a payslip PDF for a processed pay run|download payslips for 500 employees in one "
                "batch ~ the batch job returns a ZIP with 500 PDFs|regenerate a payslip after a correction ~ "
                "the new PDF shows the corrected amounts and the old one is marked superseded",
                "Process a pay run for 10 employees|GET /v2/payslips?pay_run=:id|GET /v2/payslips/:id/pdf for "
                "the first payslip|Open the PDF",
                "the PDF shows the same amounts as the JSON payslip, including year-to-date totals",
            ),
            (
                "Webhooks for pay events",
                "Webhooks",
                "POST /v2/webhook-subscriptions",
                "webhook event",
                "notify,sync",
                "Signed webhooks for pay run, payment and employee events with retries and a delivery log.",
                "subscribe to pay_run.processed events|verify the signature of a webhook delivery ~ the HMAC "
                "in the Paystream-Signature header matches the payload|replay a failed webhook delivery ~ the "
                "delivery is sent again with the same event id",
                "POST /v2/webhook-subscriptions for pay_run.processed|Process a pay run|Inspect the delivery "
                "on the test endpoint|Verify the Paystream-Signature header",
                "exactly one signed delivery arrives within 30 seconds and retries stop after a 2xx",
            ),
            (
                "Timesheet import",
                "Time",
                "POST /v2/timesheets/batch",
                "timesheet entry",
                "list,time",
                "Bulk import of hourly timesheet entries with overtime rules per state.",
                "import 2,000 timesheet entries in one batch|import entries that cross midnight ~ hours are "
                "split across the two days for the overtime rules|re-send a batch that partly failed ~ entries "
                "already imported are skipped and only the failed rows are imported",
                "Build a batch of 2,000 entries for 40 employees|POST /v2/timesheets/batch|Poll the batch "
                "status|GET the imported entries",
                "every valid entry is imported once and errors list the offending rows",
            ),
            (
                "Off-cycle payments",
                "Payroll",
                "POST /v2/off-cycle-payments",
                "off-cycle payment",
                "money",
                "Bonus, commission and correction payments outside the regular schedule, taxed with the "
                "supplemental rate.",
                "pay a $5,000 bonus off-cycle|pay a correction for a missed overtime shift ~ the correction is "
                "taxed with the regular method and shows on the next payslip|cancel an off-cycle payment "
                "before funding ~ the payment is cancelled and never funded",
                "POST /v2/off-cycle-payments with type bonus and $5,000.00 gross|Calculate the payment|Submit "
                "it for funding",
                "federal tax is withheld at the 22% supplemental rate and the net amount is funded once",
            ),
            (
                "Garnishments",
                "Deductions",
                "POST /v2/employees/:id/garnishments",
                "garnishment",
                "money",
                "Court-ordered deductions such as child support and tax levies with priority and caps.",
                "apply two garnishments with different priorities|add a child support garnishment ~ $250 is "
                "deducted every pay period|stop a garnishment after the total is reached ~ no deduction is "
                "taken once the total is reached",
                "POST a child support garnishment of $250 per pay period|Add a tax levy with priority 2|Run a "
                "pay run preview",
                "garnishments are taken in priority order and never exceed the legal disposable-income limit",
            ),
            (
                "Idempotent payment submission",
                "Payments",
                "POST /v2/pay-runs/:id/submit",
                "payment batch",
                "money,sync",
                "Submitting a pay run for funding is idempotent by Idempotency-Key so retries never pay anyone twice.",
                "submit a pay run for funding|retry a submission after a network timeout ~ the retry returns "
                "the original result and no second batch is created|submit with a reused Idempotency-Key ~ a "
                "different body with a reused key is rejected with 422",
                "Calculate a pay run for 25 employees|POST /v2/pay-runs/:id/submit with Idempotency-Key "
                "pr-0314|Repeat the same request after 5 seconds",
                "the second request returns the original response and only one payment batch is created",
            ),
            (
                "Year-end W-2 forms",
                "Tax",
                "GET /v2/companies/:id/w2",
                "W-2 form",
                "list,time",
                "Generates W-2 forms and the EFW2 file for the Social Security Administration at year end.",
                "generate W-2 forms for a company|download the EFW2 file ~ the EFW2 file passes the SSA "
                "AccuWage check|correct a W-2 with a W-2c ~ the W-2c shows the original and corrected amounts",
                "Process all pay runs of the tax year|POST /v2/companies/:id/year-end|GET "
                "/v2/companies/:id/w2|Compare box 1 with the payroll register",
                "every W-2 matches the year-to-date totals of the payroll register",
            ),
        ],
    ),
]

# --------------------------------------------------------------------------
# Platforms: contexts (title phrase, reproduction step), wording, environments
# --------------------------------------------------------------------------
CONTEXTS = {
    "mobile": (
        (
            "after upgrading from the previous version",
            "Upgrade the app over the previous store version without reinstalling",
        ),
        ("on a slow 3G connection", "Throttle the network to 3G (Network Link Conditioner or emulator settings)"),
        ("in dark mode", "Switch the phone to dark mode"),
        ("with the screen reader on", "Turn on VoiceOver (iOS) or TalkBack (Android)"),
        ("when the session has expired", "Revoke the session from the admin console"),
        ("after returning from background", "Send the app to the background for 10 minutes and reopen it"),
        ("in airplane mode", "Enable airplane mode"),
        ("with the phone language set to Arabic", "Set the phone language to Arabic"),
        ("on first launch after install", "Delete and reinstall the app"),
        ("with the largest text size", "Set the system text size to the largest accessibility size"),
        ("in landscape", "Rotate the phone to landscape"),
        ("with battery saver on", "Enable Low Power Mode or Battery Saver"),
    ),
    "web": (
        ("in Safari", "Use Safari on macOS"),
        ("after the session times out", "Leave the tab idle for 35 minutes"),
        ("with browser zoom at 200%", "Set the browser zoom to 200%"),
        ("with the page open in two tabs", "Open the same page in a second tab"),
        ("with a screen reader", "Turn on NVDA (Windows) or VoiceOver (macOS)"),
        ("on a slow connection", "Throttle the network to Slow 3G in DevTools"),
        ("after switching accounts", "Switch to another account from the account menu"),
        ("on mobile Safari", "Open the page in Safari on an iPhone"),
        ("with the browser set to German", "Set the browser language to German (de-DE)"),
        ("with an ad blocker enabled", "Enable uBlock Origin"),
    ),
    "pos": (
        ("when the receipt printer is offline", "Switch off the receipt printer"),
        ("during the end-of-day close", "Start the end-of-day close on another till"),
        ("with the card reader disconnected", "Unplug the card reader USB cable"),
        ("after the network drops mid-transaction", "Disconnect the till from Wi-Fi while the payment is in progress"),
        ("in training mode", "Switch the till to training mode"),
        ("with more than 40 items in the basket", "Add 40 or more items to the basket"),
        ("after a shift change", "Clock out and clock in as a different cashier"),
        ("on a busy Saturday service", "Run the load script that simulates 12 tills"),
    ),
    "tv": (
        ("after resuming from standby", "Put the TV in standby for 30 minutes and turn it back on"),
        ("with audio description on", "Enable audio description in the accessibility settings"),
        ("on 4K HDR titles", "Pick a 4K HDR title such as The Long Coast"),
        ("when pressing remote buttons quickly", "Press Right on the remote ten times quickly"),
        ("on a kids profile", "Switch to a kids profile"),
        ("on a 5 Mbps connection", "Limit the router bandwidth to 5 Mbps"),
        ("after several hours in the app", "Leave the app running for four hours"),
        ("with Arabic subtitles", "Turn on Arabic subtitles"),
    ),
    "fw": (
        ("after an OTA update", "Update the hub over the air to the latest beta"),
        ("when Wi-Fi reconnects", "Restart the router and wait for the hub to reconnect"),
        ("with more than 40 paired devices", "Pair at least 40 Zigbee devices"),
        ("after a power cut", "Unplug the hub for 10 seconds and plug it back in"),
        ("after a Zigbee channel change", "Change the Zigbee channel from 15 to 25 in advanced settings"),
        ("while the cloud is unreachable", "Block outbound traffic to the cloud endpoint on the router"),
        ("at the DST changeover", "Set the hub clock to 01:59 on the DST changeover night"),
        ("with two automations on the same device", "Create a second automation that targets the same device"),
    ),
    "api": (
        ("under concurrent requests", "Send 20 parallel requests with the same payload"),
        ("when paginating with an older cursor", "Request page 2 with the cursor of page 1 after adding new data"),
        ("for employees working in two states", "Use an employee with work locations in NY and NJ"),
        ("when the Idempotency-Key is reused", "Repeat the request with the same Idempotency-Key header"),
        ("with Paystream-Version 2024-06-01", "Set the Paystream-Version header to 2024-06-01"),
        ("for a company with 5,000+ employees", "Use the load-test company with 5,200 employees"),
        ("with a sandbox token", "Authenticate with a sandbox client-credentials token"),
        ("at month end", "Use a period that ends on the last day of the month"),
    ),
    "sdk": (
        ("on Android 8", "Run the sample app on an Android 8.1 emulator"),
        ("while the map is rotated", "Rotate the map 90 degrees with two fingers"),
        ("with offline packs only", "Disable the network after downloading an offline pack"),
        ("in a React Native host app", "Embed the map view in the React Native sample"),
        ("at zoom 18 and above", "Zoom in to level 18 or more"),
        ("after the host activity is recreated", "Enable Don't keep activities and switch apps"),
        ("with a custom style", "Load the custom night-transit style JSON"),
        ("on a 120 Hz display", "Use a device with a 120 Hz display"),
    ),
}

# app: what crashes or restarts; goto: how the condensed steps reach `where`;
# nav: how focus moves.
PLATFORM_WORDS = {
    "mobile": dict(app="app", goto="Go to the {where}", nav="keyboard or switch control"),
    "web": dict(app="browser tab", goto="Open the {where}", nav="keyboard"),
    "pos": dict(app="till", goto="Open the {where}", nav="keyboard"),
    "tv": dict(app="app", goto="Navigate to the {where} with the remote", nav="remote"),
    "fw": dict(app="hub", goto="Open the {where} in the Nestwise app", nav="keyboard"),
    "api": dict(app="service", goto="Call {endpoint}", nav="keyboard"),
    "sdk": dict(app="host app", goto="Add a {where} to the sample app", nav="keyboard"),
}

ANDROID_DEVICES = (
    "Pixel 7",
    "Pixel 8 Pro",
    "Pixel 6a",
    "Samsung Galaxy S23",
    "Samsung Galaxy A54",
    "OnePlus 11",
    "Xiaomi Redmi Note 12",
    "Motorola moto g84",
    "Samsung Galaxy Tab S9",
)
ANDROID_VERSIONS = ("12", "13", "14", "14", "15", "15", "16")
IOS_DEVICES = (
    "iPhone 15 Pro",
    "iPhone 13 mini",
    "iPhone SE (3rd gen)",
    "iPhone 14",
    "iPhone 12",
    "iPhone 16",
    "iPad Air (M2)",
)
IOS_VERSIONS = ("17.6.1", "18.1", "18.3.2", "18.5", "18.6", "26.0.1", "26.1")
BROWSERS = (
    "Chrome 131 on Windows 11",
    "Chrome 138 on macOS 15.5",
    "Firefox 128 ESR on Windows 10",
    "Safari 18.3 on macOS 15.3",
    "Edge 136 on Windows 11",
    "Firefox 140 on Ubuntu 24.04",
    "Safari on iOS 18.5 (iPhone 14)",
    "Chrome 137 on Android 15 (Pixel 8)",
)
WEB_ENVS = ("production", "production", "staging", "UAT")
TILL_HARDWARE = ("Elo PayPoint Plus, Windows 10 IoT", "HP Engage One, Windows 11 IoT", "Sunmi T2s, Android 11")
CARD_READERS = ("Verifone P400 (fw 3.8.1)", "Verifone V400m (fw 4.1.0)", "Verifone P400 (fw 3.9.0)")
TV_DEVICES = (
    "Samsung QN90B (Tizen 6.5)",
    "Samsung CU7100 (Tizen 7.0)",
    "LG C2 (webOS 22)",
    "LG G3 (webOS 23)",
    "Apple TV 4K 3rd gen (tvOS 18.2)",
    "Chromecast with Google TV (Android TV 12)",
    "Fire TV Stick 4K Max (Fire OS 8)",
    "Roku Ultra (Roku OS 13)",
    "Sony Bravia X90L (Google TV 12)",
)
HUB_RADIOS = ("Zigbee ch 15, Z-Wave EU", "Zigbee ch 20, Thread", "Zigbee ch 25, Z-Wave US", "Zigbee ch 11")
API_CLIENTS = ("paystream-python 3.4.0", "paystream-node 2.1.3", "curl 8.5.0", "Postman 11.2", "paystream-go 1.8.0")
API_VERSIONS = ("2024-06-01", "2025-01-15", "2025-09-01")

REPORTERS = (
    "a.kowalski",
    "m.okafor",
    "s.lindqvist",
    "r.tanaka",
    "j.moreau",
    "p.nair",
    "l.fischer",
    "d.osei",
    "c.ramirez",
    "e.novak",
    "h.kim",
    "t.brennan",
    "qa-automation",
    "support-sync",
    "f.haddad",
    "n.petrov",
    "i.silva",
    "k.mensah",
)
LANGUAGES = ("German", "French", "Polish", "Spanish", "Portuguese", "Dutch", "Turkish")
TIMEZONES = (
    "Europe/Lisbon",
    "America/New_York",
    "Australia/Sydney",
    "Asia/Kolkata",
    "America/Los_Angeles",
    "Europe/Berlin",
)
SLACK_CHANNELS = ("qa-triage", "support-escalations", "release-train", "payments-oncall", "mobile-dev")

# --------------------------------------------------------------------------
# Failure modes
# --------------------------------------------------------------------------
# (name, platforms, needs one of these tags, label, weight, severity weights
# (critical, high, medium, low), detail kind, problems, expected results).
# A problem is (titles, actual results): any of its titles fits any of its
# actual results, and a duplicate re-tells the same problem in other words.
# Slots: act, ctx (" on a slow 3G connection" or ""), where, obj, objs, comp,
# app, nav, endpoint, cur, a, b, a1, d, n, code, lang, tz, t1, t2, i18n,
# expect, Expect.
MODES = (
    (
        "crash",
        "mobile tv sdk pos",
        "",
        "crash",
        3,
        (12, 48, 32, 8),
        "trace",
        (
            (
                (
                    "App crashes when trying to {act}{ctx}",
                    "Crash on the {where} after I {act}",
                    "Force close while trying to {act}{ctx}",
                    "Fatal exception in {comp} when trying to {act}",
                ),
                (
                    "The {app} closes without any error message and returns to the home screen.",
                    "The {app} crashes every time at the last step and the action is not completed.",
                ),
            ),
            (
                (
                    "{where}: {app} freezes, then crashes{ctx}",
                    "Crash – cannot {act}{ctx}",
                    "{app} hangs and crashes on the {where}",
                ),
                (
                    "The screen freezes for about two seconds, then the {app} crashes; after relaunch it opens on the "
                    "start screen.",
                    "The UI stops responding for a few seconds before the {app} is killed and restarts.",
                ),
            ),
        ),
        ("{Expect}.", "No crash; {expect}."),
    ),
    (
        "spinner",
        "mobile web tv pos",
        "",
        "ui-hang",
        3,
        (2, 30, 50, 18),
        "log",
        (
            (
                (
                    "Spinner never stops after trying to {act}{ctx}",
                    "Endless loading when I {act}",
                    "Cannot {act}: the screen keeps loading{ctx}",
                ),
                (
                    "The loading indicator keeps spinning for more than {n} minutes and nothing else happens.",
                    "The button turns into a spinner and never comes back; going back and retrying gives the same "
                    "result.",
                ),
            ),
            (
                (
                    "{where} stuck on the loading indicator{ctx}",
                    "Loading spinner hangs forever on the {where}",
                    "Blank {where} with a spinner{ctx}",
                ),
                (
                    "A blank {where} with a spinner is shown and only restarting the {app} helps.",
                    "The {where} never finishes loading; the skeleton placeholders stay on screen.",
                ),
            ),
        ),
        ("{Expect}.", "The request completes, or fails with a clear error within 10 seconds; {expect}."),
    ),
    (
        "wrong_total",
        "mobile web pos tv api",
        "money",
        "payments",
        3,
        (8, 45, 40, 7),
        "",
        (
            (
                (
                    "Wrong total shown when I {act}",
                    "{obj} total off by {cur}{d}{ctx}",
                    "Incorrect total when trying to {act}",
                ),
                (
                    "The total shows {cur}{a} but it should be {cur}{b}.",
                    "The total is {cur}{a}; the prices in the breakdown add up to {cur}{b}.",
                ),
            ),
            (
                (
                    "Amount on the {where} does not match the receipt",
                    "Charged amount differs from the amount shown when I {act}",
                    "Incorrect amount charged when trying to {act}{ctx}",
                ),
                (
                    "The {where} shows {cur}{b}, but {cur}{a} was charged.",
                    "The receipt says {cur}{a} while {cur}{b} was shown before paying.",
                ),
            ),
            (
                ("Total ignores the discount when I {act}{ctx}", "Discount not applied to the {obj} total"),
                ("The discount line is shown but the total stays at {cur}{a} instead of {cur}{b}.",),
            ),
        ),
        ("The total is {cur}{b}, matching the itemised breakdown.", "{Expect}, and the amount is {cur}{b}."),
    ),
    (
        "double_charge",
        "mobile web pos api tv",
        "money",
        "payments",
        2,
        (35, 45, 17, 3),
        "log",
        (
            (
                (
                    "Charged twice when trying to {act}{ctx}",
                    "Duplicate payment captured for the {obj}",
                    "Double charge after retrying on the {where}",
                ),
                (
                    "Two captures of {cur}{a} with the same order reference appear in the payment gateway.",
                    "The card statement shows {cur}{a} twice, a few seconds apart.",
                ),
            ),
            (
                (
                    "Error shown but payment taken when I {act}",
                    "Payment fails with an error yet the customer is charged{ctx}",
                ),
                (
                    "An error is shown, yet the payment of {cur}{a} is captured; retrying charges the card again.",
                    "The {app} reports a failure but the gateway shows a successful capture of {cur}{a}.",
                ),
            ),
        ),
        ("The payment is captured exactly once; {expect}.",),
    ),
    (
        "timezone",
        "mobile web pos tv fw api sdk",
        "time",
        "timezone",
        3,
        (3, 30, 50, 17),
        "",
        (
            (
                (
                    "Times on the {where} are one hour off{ctx}",
                    "{obj} time shifted by one hour after the DST change",
                    "Wrong time shown after the clocks change when I {act}",
                ),
                (
                    "The {obj} shows {t1} instead of {t2}.",
                    "Everything after the DST switch is shown one hour late ({t1} instead of {t2}).",
                ),
            ),
            (
                (
                    "Date shown one day early for {objs} created near midnight",
                    "{objs} after 23:00 listed under the wrong day",
                    "Off-by-one day on the {where} for users in {tz}",
                ),
                (
                    "Items created after 23:00 local time are listed under the next day.",
                    "Anything after 23:00 in {tz} appears under the following date because UTC is used for grouping.",
                ),
            ),
            (
                ("Wrong timezone used for the {obj} when the user's timezone is {tz}", "Timezone ignored when I {act}"),
                ("Times are shown in UTC instead of {tz}.", "The {obj} uses the server timezone rather than {tz}."),
            ),
        ),
        (
            "Times are shown in the local timezone ({tz}); {expect}.",
            "{Expect}, with times in the user's local timezone.",
        ),
    ),
    (
        "stale_cache",
        "mobile web pos tv fw api sdk",
        "sync list",
        "caching",
        3,
        (2, 25, 55, 18),
        "",
        (
            (
                (
                    "Stale {obj} data shown after I {act}",
                    "Changes not reflected on the {where} until restart",
                    "Cached {objs} not invalidated when I {act}",
                ),
                (
                    "The {where} keeps showing the previous {obj} for up to {n} minutes; only a restart refreshes it.",
                    "The old values are still shown although the API response already contains the new ones.",
                ),
            ),
            (
                ("{where} shows outdated {objs} on one device{ctx}", "Second device shows an old {obj} after refresh"),
                (
                    "The change is visible on a second device but not on this one, even after refreshing.",
                    "One device shows the new {obj}, the other keeps the old one until the {app} is restarted.",
                ),
            ),
        ),
        ("{Expect}, and new data is visible immediately.",),
    ),
    (
        "a11y",
        "mobile web tv pos",
        "",
        "accessibility",
        2,
        (0, 15, 50, 35),
        "",
        (
            (
                (
                    "Accessibility label missing on the {where}",
                    'Screen reader announces "button" instead of the action on the {where}',
                    "Unlabelled controls on the {where}",
                ),
                (
                    'The screen reader announces "button, unlabelled" for the primary action.',
                    'The screen reader reads only "button" for every icon on the {where}.',
                ),
            ),
            (
                (
                    "Focus order wrong on the {where} with {nav} navigation",
                    "Cannot reach the {obj} controls with {nav} navigation",
                ),
                (
                    "Focus jumps from the header straight to the footer, skipping the {obj} controls.",
                    "The {obj} controls cannot be focused with {nav} navigation at all.",
                ),
            ),
            (
                (
                    "Insufficient colour contrast for error text on the {where}",
                    "Error text on the {where} fails WCAG contrast",
                ),
                ("The error text is #9E9E9E on white, a contrast ratio of 2.7:1.",),
            ),
            (
                (
                    "Screen reader skips the {obj} details on the {where}",
                    "{obj} details not read out by the screen reader",
                ),
                ("The screen reader jumps over the {obj} details, so they are never read out.",),
            ),
        ),
        ("Every control on the {where} has a descriptive label and a logical focus order (WCAG 2.1 AA).",),
    ),
    (
        "rtl",
        "mobile web tv",
        "",
        "i18n",
        1,
        (0, 8, 52, 40),
        "",
        (
            (
                (
                    "Layout broken in RTL languages on the {where}",
                    "{where}: text overlaps icons when the language is Arabic",
                    "Mirrored layout cuts off the {obj} in Hebrew",
                ),
                (
                    "In Arabic the labels overlap the icons and the {obj} is cut off at the left edge.",
                    "With a right-to-left language the {obj} text runs under the icons and is clipped.",
                ),
            ),
            (
                (
                    "RTL: arrows and chevrons not mirrored on the {where}",
                    "Back arrow points the wrong way in Arabic on the {where}",
                ),
                ("Arrows point the wrong way and the primary button is partly off-screen.",),
            ),
        ),
        ("The layout mirrors correctly for right-to-left languages and no text is clipped.",),
    ),
    (
        "memory_leak",
        "mobile web pos tv fw api sdk",
        "",
        "performance",
        2,
        (5, 40, 45, 10),
        "log",
        (
            (
                (
                    "Memory leak on the {where} after repeated navigation",
                    "Memory grows by ~{n}0 MB every time I {act}",
                    "{comp} leaks {obj} objects{ctx}",
                ),
                (
                    "Memory use climbs from {n}20 MB to {n}90 MB after repeating the flow ten times and is never "
                    "released.",
                    "Each attempt adds about {n}0 MB that is never freed.",
                ),
            ),
            (
                (
                    "Out of memory after a few hours on the {where}",
                    "{app} becomes sluggish and is killed after long use{ctx}",
                ),
                ("After about {n} hours the {app} becomes sluggish and is eventually killed by the system.",),
            ),
        ),
        ("Memory returns to the baseline after leaving the {where}; {expect}.",),
    ),
    (
        "server_error",
        "mobile web api pos tv",
        "",
        "backend",
        3,
        (10, 45, 38, 7),
        "http",
        (
            (
                (
                    "500 Internal Server Error when trying to {act}",
                    "Server error when I {act}",
                    '"Something went wrong" on the {where} (HTTP 500)',
                ),
                (
                    "The request to {endpoint} returns HTTP 500 with error code {code}.",
                    'An error says "Something went wrong. Please try again later." and nothing is saved.',
                ),
            ),
            (
                ("{endpoint} fails intermittently with 502/504{ctx}", "Intermittent gateway timeouts when I {act}"),
                (
                    "Roughly one request in {n} fails with 502 Bad Gateway after 30 seconds.",
                    "Every few attempts the request hangs for 30 s and ends with 504 Gateway Timeout.",
                ),
            ),
        ),
        ("{Expect}.", "The request succeeds with a 2xx response; {expect}."),
    ),
    (
        "race",
        "mobile web pos api fw tv",
        "sync money",
        "concurrency",
        2,
        (10, 45, 40, 5),
        "log",
        (
            (
                (
                    "Race condition when two users {act} at the same time",
                    "Concurrent updates to the {obj} overwrite each other",
                ),
                ("Only one of the two changes survives; the other is silently lost.",),
            ),
            (
                (
                    "Two {objs} created when the request is sent twice quickly",
                    "Double submit creates duplicate {objs}{ctx}",
                ),
                ("Two {objs} are created with identical data a few milliseconds apart.",),
            ),
            (
                (
                    "Intermittent failure to {act} when a sync runs in parallel",
                    "Conflict error when I {act} during background sync",
                ),
                ("About one attempt in {n} fails with a conflict error and the state is left half-updated.",),
            ),
        ),
        ("Concurrent requests are serialised or rejected with a clear conflict error; {expect}.",),
    ),
    (
        "slow_query",
        "mobile web pos api",
        "list",
        "performance",
        3,
        (3, 35, 50, 12),
        "sql",
        (
            (
                (
                    "{where} takes {n}{n}s to load for accounts with many {objs}",
                    "Very slow {obj} search for large accounts ({n}{n} s)",
                    "Slow query when I {act}{ctx}",
                ),
                (
                    "The {where} takes {n}{n} seconds to respond and sometimes times out.",
                    "The {objs} query runs for {n}.{n} s on the primary database (see log).",
                ),
            ),
            (
                ("Timeouts loading {obj} history older than six months", "Second page of {objs} times out"),
                ("The first page shows after a long wait; the second page times out.",),
            ),
        ),
        ("The {where} responds in under 2 seconds at p95 for accounts with 10,000 {objs}.",),
    ),
    (
        "translation",
        "mobile web tv pos",
        "",
        "i18n",
        1,
        (0, 4, 44, 52),
        "",
        (
            (
                (
                    "Untranslated string on the {where} in {lang}",
                    "Placeholder key shown instead of text on the {where}",
                ),
                ('The button reads "{i18n}" instead of a translated label.',),
            ),
            (
                ("Wrong {lang} translation on the {where}", "Misleading {lang} text on the {where}"),
                ('The {lang} text says the opposite of the English source: "Cancel" is translated as "Confirm".',),
            ),
            (
                ("Plural form wrong in {lang} for the number of {objs}", "{lang}: wrong plural for {objs}"),
                ('The label reads "2 {obj}" instead of using the plural form.',),
            ),
        ),
        ("All text on the {where} is translated correctly into {lang}.",),
    ),
    (
        "validation",
        "mobile web pos api tv",
        "form",
        "validation",
        3,
        (2, 25, 55, 18),
        "",
        (
            (
                (
                    "Form accepts invalid input when I {act}",
                    "No error message for a missing required field on the {where}",
                ),
                ("The form submits with an empty required field and the record is saved without it.",),
            ),
            (
                ("Cannot {act}: valid input rejected", "Input with an apostrophe rejected when trying to {act}"),
                ('Valid input such as O\'Brien is rejected with "Invalid format".',),
            ),
            (
                (
                    "Validation error cut off on the {where}",
                    "Field marked invalid without an explanation on the {where}",
                ),
                ("The field turns red but no message explains what is wrong.",),
            ),
        ),
        ("Invalid input is rejected with a clear inline message and valid input is accepted; {expect}.",),
    ),
    (
        "notification",
        "mobile web tv fw",
        "notify",
        "notifications",
        3,
        (2, 30, 50, 18),
        "log",
        (
            (
                ("No notification received for the {obj}{ctx}", "Notifications about the {obj} never arrive"),
                ("Nothing arrives; the delivery log shows the message as DROPPED.",),
            ),
            (
                (
                    "Notification opens the wrong screen instead of the {where}",
                    "Deep link from the notification ignores the {where}",
                ),
                ("Tapping the notification opens the home screen instead of the {where}.",),
            ),
            (
                (
                    "Duplicate notifications about the same {obj}",
                    "Same notification delivered three times after I {act}",
                ),
                ("Three identical notifications arrive within a minute.",),
            ),
        ),
        ("Exactly one notification arrives within a minute and opens the {where}.",),
    ),
    (
        "session",
        "mobile web tv api pos",
        "",
        "auth",
        2,
        (5, 40, 45, 10),
        "http",
        (
            (
                ("Logged out unexpectedly while trying to {act}", "Session expiry loses unsaved {obj} changes"),
                ("The user is sent back to sign in and the entered data is lost.",),
            ),
            (
                ("Token refresh loop on the {where}{ctx}", "Endless token refresh when I {act}"),
                ("The {app} calls the token endpoint in a loop, about {n}0 requests a second, and never loads.",),
            ),
            (
                ("401 Unauthorized when I {act} right after a token refresh", "Fresh token rejected with 401{ctx}"),
                ("The request fails with 401 although a fresh token was issued a second earlier.",),
            ),
        ),
        ("The session is renewed silently and {expect}.",),
    ),
    (
        "layout",
        "mobile web tv pos",
        "",
        "ui",
        2,
        (0, 10, 55, 35),
        "",
        (
            (
                (
                    "Button hidden behind the keyboard on the {where}",
                    "Primary button out of reach on small screens on the {where}",
                ),
                ("The primary button is partly covered and cannot be reached on small screens.",),
            ),
            (
                ("Long {obj} names truncated on the {where}", "Text cut off on the {where}{ctx}"),
                ("Text is cut off after about 20 characters, with no tooltip or wrapping.",),
            ),
            (
                ("Dark mode: text unreadable on the {where}", "Unreadable text on the {where} in dark mode"),
                ("Dark grey text is drawn on a black background.",),
            ),
            (
                ("Layout jumps while the {obj} list loads", "Content shifts on the {where} while loading"),
                (
                    "The content jumps down by about 100 px when the {objs} finish loading, so taps land on the "
                    "wrong item.",
                ),
            ),
        ),
        ("All content on the {where} is visible and usable at every screen size and theme.",),
    ),
    (
        "data_loss",
        "mobile web pos tv fw sdk",
        "sync",
        "data-loss",
        2,
        (18, 50, 27, 5),
        "log",
        (
            (
                ("{obj} changes lost after going offline", "Offline changes not synced when the connection returns"),
                ("After reconnecting, the change is gone on every device and no error was shown.",),
            ),
            (
                ("Sync conflict silently discards the newer {obj}", "Data loss when trying to {act}{ctx}"),
                ("The older version wins the sync and overwrites the newer {obj}.",),
            ),
        ),
        ("No data is lost: offline changes are synced when the connection returns; {expect}.",),
    ),
    (
        "watchdog",
        "fw",
        "",
        "stability",
        3,
        (20, 50, 25, 5),
        "trace",
        (
            (
                (
                    "Hub reboots (watchdog reset) when I {act}",
                    "Spontaneous reboot while processing {objs}{ctx}",
                    "Crash in the {comp} task{ctx}",
                ),
                ("The hub reboots within a few seconds; the status LED cycles red, amber, green.",),
            ),
            (
                ("Hub unresponsive after {n} days; LED stays amber", "Hub stops responding{ctx}"),
                ("The hub stops answering on the local API and needs a power cycle.",),
            ),
        ),
        ("The hub keeps running without a reboot; {expect}.",),
    ),
    (
        "device_offline",
        "fw",
        "",
        "connectivity",
        3,
        (8, 45, 40, 7),
        "log",
        (
            (
                (
                    "Devices shown as offline after I {act}",
                    "Zigbee devices drop off the network{ctx}",
                    "{objs} become unreachable{ctx}",
                ),
                (
                    "{n} of the paired devices show Offline in the app although they still respond to their "
                    "physical buttons.",
                ),
            ),
            (
                ("Device state not reported back after trying to {act}", "App shows the wrong state for the {obj}"),
                ("Commands are accepted but the device never reports its new state.",),
            ),
        ),
        ("Every paired device stays online and reports its state within two seconds.",),
    ),
    (
        "contract",
        "api",
        "",
        "api-contract",
        3,
        (3, 35, 50, 12),
        "http",
        (
            (
                (
                    "{endpoint} returns 200 with an error body instead of 4xx",
                    "Errors reported with HTTP 200 by {endpoint}",
                ),
                ('The endpoint answers 200 OK with {{"error": "invalid_state"}} in the body.',),
            ),
            (
                ("Pagination cursor skips {objs}{ctx}", "Missing {objs} when following next_cursor"),
                ("Records created between two page requests are skipped when following next_cursor.",),
            ),
            (
                (
                    "Response missing a documented field for the {obj}",
                    "Schema mismatch between the OpenAPI spec and {endpoint}",
                    "Breaking change in the {obj} payload without a version bump",
                ),
                ("The field is absent from the response although the OpenAPI spec marks it as required.",),
            ),
        ),
        ("The response follows the published OpenAPI contract for {endpoint}.",),
    ),
    (
        "rounding",
        "web api pos",
        "money",
        "calculation",
        2,
        (5, 40, 45, 10),
        "",
        (
            (
                ("Rounding error of {cur}0.01 in the {obj} calculation", "Cents lost when I {act}{ctx}"),
                ("The result is {cur}{a} while the reference calculation gives {cur}{a1}.",),
            ),
            (
                (
                    "Half-cent rounding differs between the {where} and the export",
                    "Totals differ by one cent between screen and export",
                ),
                ("Line totals are rounded before summing, so the total is one cent off.",),
            ),
        ),
        ("Amounts are rounded half-up per line as documented, giving {cur}{a1}.",),
    ),
    (
        "playback",
        "tv",
        "",
        "playback",
        3,
        (8, 45, 40, 7),
        "trace",
        (
            (
                ("Playback error {code} when trying to {act}", "Player fails with {code}{ctx}"),
                ("The player shows error {code} after buffering and returns to the title page.",),
            ),
            (
                ("Black screen with audio only{ctx}", "No picture, only sound, when I {act}"),
                ("Audio plays but the picture stays black.",),
            ),
            (
                ("Audio drifts out of sync on the {where}", "Lip sync off after ten minutes{ctx}"),
                ("Audio is about 400 ms behind the picture after ten minutes.",),
            ),
            (
                ("Video stutters and drops to SD when I {act}", "Constant stutter and low resolution{ctx}"),
                ("The picture stutters every few seconds and drops to 540p on a 50 Mbps line.",),
            ),
        ),
        ("Playback starts within three seconds in the best supported quality; {expect}.",),
    ),
    (
        "render_glitch",
        "sdk",
        "",
        "rendering",
        3,
        (2, 30, 50, 18),
        "log",
        (
            (
                ("Tiles flicker at zoom {n}{n} when I {act}", "Map flickers{ctx}"),
                ("Tiles flash white for one frame each time a new zoom level loads.",),
            ),
            (
                ("Blank grey tiles{ctx}", "Grey tiles never load when I {act}"),
                ("Parts of the map stay grey and never render, even after panning away and back.",),
            ),
            (
                ("{obj} drawn at the wrong position after rotating the map", "Offset {obj} when I {act}"),
                ("The {obj} is offset by roughly 20 px to the north-east.",),
            ),
            (
                ("Labels overlap after I {act}", "Label collision broken{ctx}"),
                ("Street labels overlap each other and the collision detection seems off.",),
            ),
        ),
        ("The map renders without gaps or flicker; {expect}.",),
    ),
    (
        "sdk_api",
        "sdk",
        "",
        "public-api",
        3,
        (2, 30, 50, 18),
        "trace",
        (
            (
                ("{where} completion callback not called when I {act}", "Callback never fires on {where}{ctx}"),
                ("The callback never fires, so the host app waits forever.",),
            ),
            (
                (
                    "{where} throws IllegalStateException if used before the style loads",
                    "Early call to {where} crashes the host app",
                ),
                ("The call throws IllegalStateException: Style is not loaded yet.",),
            ),
            (
                ("{where} ignores options set after initialisation", "Options on {where} have no effect{ctx}"),
                ("The option is silently ignored and the default is used.",),
            ),
            (
                ("Listener leak in {where}{ctx}", "{where} keeps the old activity alive"),
                ("Listeners registered on {where} are never removed and the old activity stays in memory.",),
            ),
        ),
        ("{where} behaves as documented in the API reference; {expect}.",),
    ),
    (
        "battery",
        "mobile sdk",
        "",
        "performance",
        1,
        (2, 30, 50, 18),
        "",
        (
            (
                ("Excessive battery drain after I {act}", "Phone gets hot on the {where}{ctx}"),
                ("Battery drops by about {n}0% an hour while the {app} is in the background.",),
            ),
            (
                ("{comp} keeps GPS active in the background", "Location stays on after leaving the {where}"),
                ("The location indicator stays on after leaving the {where}.",),
            ),
        ),
        ("Location and network work stop in the background and battery use stays below 2% an hour.",),
    ),
    (
        "peripheral",
        "pos",
        "",
        "hardware",
        3,
        (5, 40, 45, 10),
        "log",
        (
            (
                ("Card reader times out when I {act}", "Till loses connection to the card terminal{ctx}"),
                ("The terminal shows PLEASE WAIT and the till reports POS-ERR {code} after 30 seconds.",),
            ),
            (
                ("Receipt printer prints blank paper after trying to {act}", "Blank receipts{ctx}"),
                ("The printer feeds paper but nothing is printed.",),
            ),
            (
                ("Cash drawer does not open{ctx}", "Cash drawer stays shut when I {act}"),
                ("The cash drawer stays closed and no kick pulse is logged.",),
            ),
        ),
        ("Peripherals respond within two seconds; {expect}.",),
    ),
)
NO_CONTEXT = ("rtl", "translation")  # they bring their own language setting
DETAIL_PROBLEMS = {"playback": (0,), "server_error": (0,)}  # details that fit one problem only
HTTP_DETAIL = {  # status line and body by failure mode
    "server_error": ("500 Internal Server Error", '{{"error": "internal_error", "request_id": "req_{rid}"}}'),
    "session": ("401 Unauthorized", '{{"error": "invalid_token", "error_description": "The access token expired"}}'),
    "contract": ("200 OK", '{{"error": "invalid_state", "detail": "{obj} is locked", "request_id": "req_{rid}"}}'),
}

# --------------------------------------------------------------------------
# Description building blocks
# --------------------------------------------------------------------------
OPENERS = (
    "Reported by a customer through support ticket #{ticket}.",
    "Found during the {ver} regression pass.",
    "Seen in production since the {ver} rollout.",
    "Reproduced by QA after a report in #{chan} on Slack.",
    "Internal dogfooding report.",
    "Came up in triage this week; reproduced on staging.",
    "Noticed while testing something else on the {where}.",
    "",
    "",
)
PROBLEMS = (
    "When I {act}{ctx}, {actual_l}",
    "{actual} This happens when I try to {act}{ctx}.",
    "Trying to {act}{ctx} does not work: {actual_l}",
    "{actual}",
    "Steps are below. In short: {actual_l}",
)
EXPECT_LINES = ("I would expect that {expect}.", "Expected behaviour: {expect}.", "", "")
FREQUENCY = (
    "Reproducible every time.",
    "Happens roughly 1 in {n} attempts.",
    "Intermittent; could not reproduce on a fast network.",
    "Reproduced by two of us on different setups.",
    "Started with {ver}; the previous release is fine.",
    "Only seen once so far, logs attached.",
    "100% reproducible on staging, not yet confirmed in production.",
    "",
)
IMPACT = {
    "mobile": (
        "Crashlytics shows {n}{n}0 affected users in the last 7 days.",
        "{n} store reviews this week mention it.",
        "Support has {n} tickets linked.",
    ),
    "web": (
        "Sentry reports {n}{n}0 events from {n} workspaces.",
        "Two enterprise customers escalated this.",
        "Support has {n} tickets linked.",
    ),
    "pos": (
        "Two restaurants reported it during Saturday service.",
        "Affects every till on site once it happens.",
        "Support has {n} tickets linked.",
    ),
    "tv": ("Mentioned in {n} support chats this week.", "Seen in about {n}% of sessions on this device family."),
    "fw": ("Reported by {n} beta households.", "Telemetry shows {n}{n}0 hubs with the same error signature."),
    "api": (
        "One payroll partner is blocked on this for their next pay date.",
        "Affects {n} companies in the sandbox and at least one in production.",
    ),
    "sdk": ("Reported by two partner apps on the developer forum.", "A partner's release is blocked on this."),
}
TRACES = {
    "android": (
        "java.lang.IllegalStateException: Fragment {cls}Fragment not attached to a context.\n"
        "    at androidx.fragment.app.Fragment.requireContext(Fragment.java:972)\n"
        "    at com.{pkg}.{mod}.{cls}ViewModel.onResult({cls}ViewModel.kt:{line})",
        "java.lang.NullPointerException: Attempt to invoke virtual method 'java.lang.String "
        "com.{pkg}.{mod}.{cls}.getId()' on a null object reference\n"
        "    at com.{pkg}.{mod}.{cls}Adapter.onBindViewHolder({cls}Adapter.kt:{line})",
        "java.lang.IndexOutOfBoundsException: Index 3 out of bounds for length 3\n"
        "    at com.{pkg}.{mod}.{cls}Repository.latest({cls}Repository.kt:{line})",
        "java.lang.OutOfMemoryError: Failed to allocate a 4194320 byte allocation with 1572864 free bytes\n"
        "    at com.{pkg}.{mod}.{cls}Renderer.draw({cls}Renderer.kt:{line})",
    ),
    "ios": (
        "Fatal error: Unexpectedly found nil while unwrapping an Optional value\n{cls}ViewController.swift:{line}",
        "EXC_BAD_ACCESS (SIGSEGV) KERN_INVALID_ADDRESS at 0x0000000000000010\nThread 0 Crashed:\n"
        "0   {app_bin}   {cls}Store.reload() + 212",
        "Simultaneous accesses to 0x2834f1d30, but modification requires exclusive "
        "access.\n{cls}SyncService.swift:{line}",
    ),
    "py": (
        'Traceback (most recent call last):\n  File "/srv/app/{mod}/services.py", line {line}, in '
        "update_{mod}\n"
        '    obj.save(update_fields=["status", "updated_at"])\npsycopg.errors.DeadlockDetected: '
        "deadlock detected",
        'Traceback (most recent call last):\n  File "/srv/app/{mod}/views.py", line {line}, in post\n'
        "    payload = serializer.validated_data[\"{mod}_id\"]\nKeyError: '{mod}_id'",
    ),
    "go": (
        "panic: runtime error: invalid memory address or nil pointer dereference\n"
        "goroutine {line} [running]:\npaystream/internal/{mod}.(*{cls}Service).Apply(...)\n"
        "\t/src/internal/{mod}/service.go:{line}",
        "ERROR pq: could not serialize access due to concurrent update (SQLSTATE 40001)\n"
        "\tat internal/{mod}/repository.go:{line}",
    ),
    "dotnet": (
        "System.NullReferenceException: Object reference not set to an instance of an object.\n"
        "   at Counterpoint.Till.{cls}Service.Complete() in {cls}Service.cs:line {line}",
        "System.InvalidOperationException: Collection was modified; enumeration operation may not execute.\n"
        "   at Counterpoint.Till.{cls}Basket.Recalculate() in {cls}Basket.cs:line {line}",
    ),
    "fw": (
        "E (8812345) zb_zdo: assert failed: nwk_addr != 0xFFFF\n"
        "W (8812350) task_wdt: Task watchdog got triggered: {mod}_task (CPU 0)\nI (8812360) system: reset "
        "reason TASK_WDT",
        "Guru Meditation Error: Core 1 panic'ed (LoadProhibited). Exception was unhandled.\n"
        "Backtrace: 0x400d5a1c:0x3ffbd5e0 0x400d7f2b:0x3ffbd610 ({mod}_handle_event at {mod}.c:{line})",
    ),
    "tv": (
        "TypeError: Cannot read properties of undefined (reading 'profileId')\n"
        "    at {cls}Controller.render (app.bundle.js:2:{line})",
        "RangeError: Maximum call stack size exceeded\n    at {cls}Store.subscribe (app.bundle.js:2:{line})",
    ),
    "tv_player": (
        "PlayerError {code}: MEDIA_ERR_DECODE (HEVC Main10 profile not supported by the decoder)\n"
        "    at Player.onError (player.bundle.js:1:{line})",
        "Uncaught (in promise) DOMException: The play() request was interrupted by a call to pause().\n"
        "    at {cls}Controller.resume (app.bundle.js:2:{line})",
    ),
}
LOG_LINES = {  # by failure mode
    "spinner": (
        "{ts} WARN  [{comp}] timeout after 30000 ms waiting for {mod} response (attempt 3/3)",
        "{ts} ERROR [{comp}] request aborted by client after 60 s, request_id=req_{hex}",
    ),
    "double_charge": (
        "{ts} WARN  [payments] capture callback received twice for order ord_{hex}; not deduplicated",
        "{ts} INFO  [payments] retry after gateway timeout sent without idempotency key (order ord_{hex})",
    ),
    "memory_leak": (
        "{ts} WARN  [{comp}] heap 49{n} MB of 512 MB after GC; {n}2,118 {cls} instances retained",
        "{ts} WARN  [{comp}] low memory warning #{n}; {cls}Cache holds {n}4 MB",
    ),
    "race": (
        "{ts} ERROR [{comp}] optimistic lock failed for {mod} {hex}: expected version 7, found 8",
        "{ts} WARN  [{comp}] two writers for {mod} {hex} within 12 ms; last write wins",
    ),
    "notification": (
        "{ts} WARN  [notifications] message {hex} DROPPED: device token not registered",
        "{ts} INFO  [notifications] fan-out for {mod} events took 4{n} s (backlog 1{n}200)",
    ),
    "data_loss": ("{ts} WARN  [sync] conflict on {mod} {hex}: server version wins, client edit discarded",),
    "device_offline": (
        "{ts} W zb_nwk: device 0x{hex} missed 3 link status messages, marking offline",
        "{ts} E zwave: no ACK from node {n}{n} after 3 retries (route 1{n}->4)",
    ),
    "render_glitch": (
        "{ts} W/Atlasline: GL_OUT_OF_MEMORY in TileRenderer.upload, tile 15/15602/12536 dropped",
        "{ts} W/Atlasline: style layer 'poi-label' evaluated {n}12 times in one frame",
    ),
    "peripheral": (
        "{ts} ERROR [Terminal] P400 response timeout (30000 ms), txn {hex}",
        "{ts} WARN  [Printer] TM-m30 status 0x{n}4 (cover open?) after print job {hex}",
    ),
}
CODE_PREFIX = {"mobile": "TRM-E", "web": "ERR_", "pos": "", "tv": "RH-", "fw": "NW-", "api": "E", "sdk": "ATL-"}


# --------------------------------------------------------------------------
# Preparation (once, at import)
# --------------------------------------------------------------------------
def _pick(rng, seq):
    """rng.choice, without its overhead (called about ten times a record)."""
    return seq[int(rng.random() * len(seq))]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _plural(noun: str) -> str:
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def _slug(text: str, sep: str) -> str:
    return sep.join("".join(c for c in word if c.isalnum()) for word in text.lower().split())


class _Base:
    """One hand-written feature with everything derived from it."""

    def __init__(self, product: dict, spec: tuple):
        (self.name, self.comp, self.where, self.obj, tags, self.desc, acts, steps, expect) = spec
        self.tags = tags.split(",")
        pairs = [act.split(" ~ ") for act in acts.split("|")]
        self.acts = [pair[0] for pair in pairs]
        self.expects = [expect] + [pair[1] for pair in pairs[1:]]
        self.Expects = [_cap(text) for text in self.expects]
        steps = steps.split("|")
        # the written steps reproduce the first act; the others start the same way
        self.act_steps = [steps] + [steps[:1] + [_cap(act)] for act in self.acts[1:]]
        self.objs = _plural(self.obj)
        self.mod = _slug(self.obj, "_")
        self.slug = _slug(self.obj, "-")
        self.cls = "".join(word[:1].upper() + word[1:] for word in _slug(self.obj, " ").split())
        if product["plat"] == "api":
            self.endpoint, self.where = self.where, self.where.split(" ", 1)[1] + " endpoint"
        else:
            self.endpoint = f"POST /api/v2/{_plural(self.slug)}"
        weighted = []
        for i, (_, plats, needs, _, weight, *_rest) in enumerate(MODES):
            if product["plat"] in plats.split() and (not needs or any(t in self.tags for t in needs.split())):
                weighted += [i] * (weight + (2 if needs else 0))
        self.modes = tuple(weighted)
        persona = product["persona"]
        scenario = "\n\n".join(
            f"Scenario: {_cap(act)}\n  Given I am signed in as {persona}\n  When I {act}\n  Then {outcome}"
            for act, outcome in zip(self.acts[:2], self.expects[:2], strict=True)
        )
        pairs = zip(self.acts, self.expects, strict=True)
        bullets = "\n".join(
            [f"- {_cap(act)}: {outcome}" for act, outcome in pairs]
            + [
                "- Errors are shown inline and nothing is saved or charged twice",
                f"- Analytics event `{self.mod}_completed` is sent once per success",
            ]
        )
        self.criteria = (scenario, bullets)


class _Product:
    def __init__(self, index: int, spec: dict):
        self.__dict__.update(spec)
        self.key = f"PRD-{index + 1}"
        self.index = index
        self.bases = [_Base(spec, f) for f in spec["features"]]
        words = PLATFORM_WORDS[self.plat]
        for b in self.bases:  # the template slots that never change for a feature
            b.slots = {
                "where": b.where,
                "obj": b.obj,
                "objs": b.objs,
                "comp": b.comp,
                "endpoint": b.endpoint,
                "app": words["app"],
                "nav": words["nav"],
                "cur": self.cur,
                "i18n": f"{b.mod}.cta_title",
            }
        self.contexts = CONTEXTS[self.plat]
        self.goto = words["goto"]
        self.impacts = IMPACT[self.plat]
        self.pkg = _slug(self.name.split()[0], "")
        self.app_bin = self.name.replace(" ", "")
        self.code_prefix = CODE_PREFIX[self.plat]

    def fork(self) -> "_Product":
        """A copy with fresh per-run state, so that generators never share any."""
        run = copy.copy(self)
        run.created = START
        run.feats = []  # features of this product in this run
        run.core = []  # the hand-written ones, picked more often
        run.tracker_no = 1000 + 337 * self.index  # upstream tracker numbering
        run.variant_no = 0
        return run


_PRODUCTS = [_Product(i, spec) for i, spec in enumerate(PRODUCTS)]
# Mode weights, tempered towards a realistic tracker: few critical, mostly medium.
_SEV_CUM = [
    tuple(accumulate((crit * 0.8, high * 0.6, medium, low * 1.4)))
    for crit, high, medium, low in (mode[5] for mode in MODES)
]


class _Feature:
    __slots__ = ("key", "product", "base", "created", "tests", "bugs")

    def __init__(self, key, product, base, created):
        self.key, self.product, self.base, self.created = key, product, base, created
        self.tests = []  # recent (key, title, created, act index) of this feature
        self.bugs = []  # recent bug specs, the originals for duplicates


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------
_DAYS: dict[int, str] = {}  # day number -> "2026-03-14T", at most ~750 entries


def _iso(ts: int) -> str:
    """`datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")`, cached by day."""
    day, sec = divmod(ts, DAY)
    prefix = _DAYS.get(day)
    if prefix is None:
        prefix = _DAYS[day] = datetime.fromtimestamp(day * DAY, _UTC).isoformat()[:11]
    return f"{prefix}{sec // 3600:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}+00:00"


def _lower_first(text: str) -> str:
    """Lower-case a sentence's first word to continue a sentence ("...: the app closes")."""
    first = text.split(" ", 1)[0]
    return text[:1].lower() + text[1:] if first in ("A", "An") or first[1:].islower() else text


def _version(p: _Product, ts: int) -> str:
    """The release a product was on at `ts`: a monthly train with patches."""
    major, minor = p.ver
    months = (ts - START) // (28 * DAY)
    minor += months
    major += minor // 16
    return f"{major}.{minor % 16}.{(ts // (9 * DAY)) % 4}"


def _environment(rng, p: _Product, ver: str):
    """(environment text, stack-trace flavour, platform label)."""
    r = rng.random()
    if p.plat in ("mobile", "sdk"):
        if r < 0.55:
            dev, os_ = _pick(rng, ANDROID_DEVICES), f"Android {_pick(rng, ANDROID_VERSIONS)}"
            flavour, label = "android", "android"
        else:
            dev, os_ = _pick(rng, IOS_DEVICES), f"iOS {_pick(rng, IOS_VERSIONS)}"
            flavour, label = "ios", "ios"
        if p.plat == "sdk":
            return f"Atlasline Maps SDK {ver}, {dev}, {os_}", flavour, label
        net = ("", ", Wi-Fi", ", 4G", ", 5G")[int(r * 40) % 4]
        return f"{dev}, {os_}, app {ver}{net}", flavour, label
    if p.plat == "web":
        return f"{_pick(rng, BROWSERS)}, {_pick(rng, WEB_ENVS)}, release {ver}", "py", "web"
    if p.plat == "pos":
        return (
            (f"Till {1 + int(r * 6)} ({_pick(rng, TILL_HARDWARE)}), Counterpoint {ver}, {_pick(rng, CARD_READERS)}"),
            "dotnet",
            "pos",
        )
    if p.plat == "tv":
        return f"{_pick(rng, TV_DEVICES)}, Reelhouse {ver}", "tv", "tv"
    if p.plat == "fw":
        return (
            (
                f"Nestwise Hub H2 rev {'BCD'[int(r * 3)]}, firmware {ver}, {6 + int(r * 40)} devices paired "
                f"({_pick(rng, HUB_RADIOS)})"
            ),
            "fw",
            "firmware",
        )
    where = "sandbox" if r < 0.7 else "production"
    return (
        (
            f"Paystream API v2 (Paystream-Version {_pick(rng, API_VERSIONS)}), {where}, "
            f"client {_pick(rng, API_CLIENTS)}, build {ver}"
        ),
        "go",
        "api",
    )


def _plan(n: int):
    """How many products, features, tests and bugs make `n` records."""
    products = min(len(_PRODUCTS), n)
    rest = n - products
    features = min(rest, max(round(0.02 * n), min(3 * products, rest // 2)))
    rest -= features
    tests = min(rest // 2, round(0.25 * n))  # with very few records, bugs first
    return products, features, tests, rest - tests


def _later(rng, start: int, power: float = 0.75) -> int:
    """A time after `start`, denser towards END (recent activity)."""
    return start + int((END - start) * rng.random() ** power)


# --------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------
def _product_record(rng, p: _Product) -> dict:
    p.created = created = START + p.index * 4 * DAY + int(rng.random() * 3 * DAY)
    return {
        "kind": "product",
        "key": p.key,
        "name": p.name,
        "description": p.desc,
        "created_at": _iso(created),
        "updated_at": _iso(END - int(rng.random() * 150 * DAY)),
    }


def _feature_record(rng, f: _Feature, variant: str | None) -> dict:
    b = f.base
    name, desc, criteria = b.name, b.desc, b.criteria[int(rng.random() * 2)]
    if variant:
        name = f"{b.name} – {variant}"
        desc = f"{b.desc} Scope of this epic: {variant}."
        criteria += f"\n- Scoped to {variant}; behaviour elsewhere is unchanged"
    updated = min(END, f.created + int(rng.random() ** 2 * 200 * DAY))
    return {
        "kind": "feature",
        "key": f.key,
        "product": f.product.key,
        "name": name,
        "description": desc,
        "acceptance_criteria": criteria,
        "created_at": _iso(f.created),
        "updated_at": _iso(updated),
    }


def _pick_act(rng, b: _Base) -> int:
    """The first act (the one with written steps) half of the time."""
    return 0 if rng.random() < 0.5 else int(rng.random() * len(b.acts))


def _test_record(rng, key: str, f: _Feature, with_feature: bool) -> dict:
    p, b = f.product, f.base
    act_i = _pick_act(rng, b)
    act, expect = b.acts[act_i], b.expects[act_i]
    ctx = _pick(rng, p.contexts) if rng.random() < 0.35 else None
    where = " " + ctx[0] if ctx else ""
    r = rng.random()
    if r < 0.55:
        title = _cap(act) + where
    elif r < 0.8:
        title = f"{b.name}: {act}{where}"
    else:
        title = f"{_cap(act)} – {_pick(rng, ('happy path', 'smoke', 'regression', 'end-to-end'))}"
    steps = [p.setup[int(rng.random() * 2)]]
    if ctx:
        steps.append(ctx[1])
    steps += b.act_steps[act_i]
    steps.append(f"Verify that {expect}")
    r = rng.random()
    if r < 0.4:
        desc = f"Verifies that a user can {act}{where} and that {expect}."
    elif r < 0.7:
        desc = f"Checks that {expect} when the user tries to {act}{where}."
    else:
        desc = f"Regression test for {b.name}. Expected outcome: {expect}."
    if rng.random() < 0.5:
        desc += f"\n\nPreconditions: signed in as {p.persona}."
    created = _later(rng, f.created)
    r = rng.random()
    status = "active" if r < 0.78 else "draft" if r < 0.9 else "archived"
    record = {
        "kind": "test",
        "key": key,
        "product": p.key,
        "title": title,
        "description": desc,
        "steps": steps,
        "status": status,
        "created_at": _iso(created),
        "updated_at": _iso(min(END, created + int(rng.random() ** 2 * 120 * DAY))),
    }
    if with_feature:
        record["feature"] = f.key
    f.tests.append((key, title, created, act_i))
    if len(f.tests) > 6:
        del f.tests[0]
    return record


def _bug_status(rng, created: int, duplicate: bool) -> tuple[str, int]:
    """(status, seconds until the last update); older bugs are more often fixed."""
    if duplicate and rng.random() < 0.8:
        return "duplicate", int(rng.random() * 10 * DAY)
    age = (END - created) / (END - START)
    r = rng.random()
    fixed = 0.12 + 0.5 * age
    if r < fixed:
        return "fixed", int((0.1 + rng.random() ** 2) * 60 * DAY)
    if r < fixed + 0.07:
        return "rejected", int(rng.random() * 20 * DAY)
    if r < fixed + 0.29:
        return "accepted", int(rng.random() * 30 * DAY)
    return "open", int(rng.random() ** 3 * 14 * DAY)


def _severity(rng, mode_i: int) -> str:
    cum = _SEV_CUM[mode_i]
    return SEVERITIES[bisect(cum, rng.random() * cum[-1])]


def _bug_record(rng, key: str, f: _Feature, orig: tuple | None, with_feature: bool) -> dict:
    """One bug; with `orig` (a spec of an earlier bug) a paraphrased duplicate of it."""
    p, b = f.product, f.base
    if orig:
        o_key, mode_i, prob_i, o_title, o_actual, act_i, ctx_i, o_created, o_sev, with_feature, o_test = orig
        mode = MODES[mode_i]
        titles, actuals = mode[7][prob_i]
        title_i = (o_title + 1 + int(rng.random() * (len(titles) - 1))) % len(titles)
        actual_i = (o_actual + 1) % len(actuals)
        created = min(END, o_created + 3600 + int(rng.random() * 20 * DAY))
        severity = o_sev if rng.random() < 0.7 else _severity(rng, mode_i)
        test = o_test if rng.random() < 0.5 else None
    else:
        mode_i = _pick(rng, b.modes)
        mode = MODES[mode_i]
        prob_i = int(rng.random() * len(mode[7]))
        titles, actuals = mode[7][prob_i]
        title_i, actual_i = int(rng.random() * len(titles)), int(rng.random() * len(actuals))
        act_i = _pick_act(rng, b)
        ctx_i = -1
        if rng.random() < 0.5 and mode[0] not in NO_CONTEXT:
            ctx_i = int(rng.random() * len(p.contexts))
        created = _later(rng, f.created)
        severity = _severity(rng, mode_i)
        test = None
        if f.tests and rng.random() < 0.4:
            test = f.tests[int(rng.random() * len(f.tests))]
            created = min(END, max(created, test[2] + 3600))
            if rng.random() < 0.7:
                act_i = test[3]  # found by that test, so the same scenario
    act = b.acts[act_i]
    ctx = p.contexts[ctx_i] if ctx_i >= 0 else None
    ver = _version(p, created)
    env, flavour, os_label = _environment(rng, p, ver)
    n = 2 + int(rng.random() * 7)
    slots = b.slots.copy()
    slots.update(
        act=act,
        ctx=" " + ctx[0] if ctx else "",
        n=n,
        ver=ver,
        expect=b.expects[act_i],
        Expect=b.Expects[act_i],
        code=f"{p.code_prefix}{1000 + int(rng.random() * 9000)}",
        lang=LANGUAGES[n - 2],
        tz=TIMEZONES[n % len(TIMEZONES)],
        t1=f"{n + 7:02d}:30",
        t2=f"{n + 6:02d}:30",
    )
    if "money" in mode[2]:
        a = 5 + int(rng.random() * 400) + int(rng.random() * 100) / 100
        b_amount = round(a * (0.75 + n / 50), 2)
        slots.update(a=f"{a:,.2f}", b=f"{b_amount:,.2f}", a1=f"{a + 0.01:,.2f}", d=f"{a - b_amount:,.2f}")
    title = _cap(titles[title_i].format_map(slots))
    r = rng.random()
    if r < 0.07 and ":" not in title:
        title = "Regression: " + title
    elif r < 0.12 and os_label in ("android", "ios"):
        title = ("[Android] " if os_label == "android" else "[iOS] ") + title
    elif r < 0.15:
        title = f"[{ver}] {title}"
    actual = _cap(actuals[actual_i].format_map(slots))
    expected = _cap(_pick(rng, mode[8]).format_map(slots))
    slots["actual"], slots["actual_l"] = actual, _lower_first(actual)

    # description: opener, problem, expectation, frequency, impact, detail
    opener = ""
    if test and rng.random() < 0.5:
        opener = f'Found while running the test "{test[1]}" ({test[0]}).'
    elif rng.random() < 0.8:
        opener = _pick(rng, OPENERS).format(
            ticket=40000 + int(rng.random() * 60000), ver=ver, chan=_pick(rng, SLACK_CHANNELS), where=b.where
        )
    parts = [
        opener,
        _pick(rng, PROBLEMS).format_map(slots),
        _pick(rng, EXPECT_LINES).format_map(slots),
        _pick(rng, FREQUENCY).format_map(slots),
    ]
    if rng.random() < 0.45:
        parts.append(_pick(rng, p.impacts).format_map(slots))
    text = " ".join(part for part in parts if part)
    detail = mode[6] if prob_i in DETAIL_PROBLEMS.get(mode[0], (prob_i,)) else ""
    if detail and rng.random() < 0.45:
        line = 40 + int(rng.random() * 700)
        if detail == "trace":
            trace = _pick(rng, TRACES["tv_player" if mode[0] == "playback" else flavour])
            text += "\n\nStack trace:\n" + trace.format(
                cls=b.cls, mod=b.mod, slug=b.slug, pkg=p.pkg, line=line, app_bin=p.app_bin, code=slots["code"]
            )
        elif detail == "http":
            status, body = HTTP_DETAIL[mode[0]]
            text += f"\n\nRequest: {b.endpoint}\nResponse: {status}\n" + body.format(
                rid=f"{rng.getrandbits(48):012x}", obj=b.cls
            )
            if status[0] == "5" and p.plat in ("web", "api") and rng.random() < 0.4:
                text += "\n\nServer log:\n" + _pick(rng, TRACES["py" if p.plat == "web" else "go"]).format(
                    cls=b.cls, mod=b.mod, line=line
                )
        elif detail == "sql":
            text += (
                f"\n\nFrom the database log:\nLOG:  duration: {n * 1113}.{line} ms  statement: "
                f"SELECT * FROM {b.mod}s WHERE account_id = $1 ORDER BY created_at DESC "
                f"OFFSET {n * 500} LIMIT 50"
            )
        else:
            text += "\n\nLog excerpt:\n" + _pick(rng, LOG_LINES[mode[0]]).format(
                ts=_iso(created - 60 - line)[:19] + "Z",
                comp=b.comp,
                mod=b.mod,
                cls=b.cls,
                n=n,
                hex=f"{rng.getrandbits(32):08x}",
            )

    # steps: detailed (setup, context, the feature's steps) or condensed
    if (rng.random() < 0.6) != bool(orig):  # a duplicate tends to the other style
        steps = [p.setup[int(rng.random() * len(p.setup))]]
        if ctx:
            steps.append(ctx[1])
        written = b.act_steps[act_i]
        steps += written[: 2 + int(rng.random() * (len(written) - 1))]
        if rng.random() < 0.4:
            steps.append(
                _pick(rng, ("Observe the result", f"Check the {b.where}", "Wait a few seconds and watch the screen"))
            )
    else:
        steps = [
            p.setup[0],
            p.goto.format(where=b.where, endpoint=b.endpoint),
            _cap(act) + (" " + ctx[0] if ctx else ""),
        ]

    status, settle = _bug_status(rng, created, orig is not None)
    p.tracker_no += 1
    labels = [os_label, mode[3]]
    if rng.random() < 0.2:
        labels.append(_pick(rng, ("regression", "customer-reported", "needs-info", "flaky", "release-blocker")))
    raw = {
        "tracker_id": f"{p.prefix}-{p.tracker_no}",
        "reporter": _pick(rng, REPORTERS),
        "environment": env,
        "build": ver,
        "steps": steps,
        "actual_result": actual,
        "expected_result": expected,
        "labels": labels,
        "component": b.comp,
    }
    if orig:
        raw["duplicate_of"] = o_key
    if rng.random() < 0.05:  # the tracker sent one field missing or blank
        field = ("actual_result", "expected_result", "environment")[int(rng.random() * 3)]
        if rng.random() < 0.5:
            del raw[field]
        else:
            raw[field] = ("", " ", "\n")[int(rng.random() * 3)]
    record = {
        "kind": "bug",
        "key": key,
        "product": p.key,
        "title": title,
        "description": text,
        "severity": severity,
        "status": status,
        "raw_data": raw,
        "created_at": _iso(created),
        "updated_at": _iso(min(END, created + settle)),
    }
    if with_feature:
        record["feature"] = f.key
    if test:
        record["test"] = test[0]
    if not orig:
        f.bugs.append((key, mode_i, prob_i, title_i, actual_i, act_i, ctx_i, created, severity, with_feature, test))
        if len(f.bugs) > 5:
            del f.bugs[0]
    return record


# --------------------------------------------------------------------------
# The stream
# --------------------------------------------------------------------------
def generate(records: int, seed: int = 0) -> Iterator[dict]:
    """Yield `records` QA records (dicts in the interchange format), deterministic for `seed`.

    Products come first, then features, then tests and bugs interleaved; every
    relation names a record yielded earlier and of the same product.
    """
    rng = random.Random(seed)
    n_products, n_features, n_tests, n_bugs = _plan(max(0, int(records)))
    products = [p.fork() for p in _PRODUCTS[:n_products]]
    for p in products:
        yield _product_record(rng, p)
    if not products:
        return

    # Features: the hand-written ones round-robin, then scoped variants.
    weights = list(accumulate(p.weight for p in products))
    core = [(p, p.bases[j]) for j in range(max(len(p.bases) for p in products)) for p in products if j < len(p.bases)]
    for i in range(n_features):
        if i < len(core):
            p, base = core[i]
            variant = None
            created = p.created + int(rng.random() * 120 * DAY)
        else:
            p = products[bisect(weights, rng.random() * weights[-1])]
            v = p.variant_no
            p.variant_no += 1
            base = p.bases[v % len(p.bases)]
            variant = p.scopes[(v // len(p.bases)) % len(p.scopes)]
            if v >= len(p.bases) * len(p.scopes):
                variant += f" (phase {1 + v // (len(p.bases) * len(p.scopes))})"
            created = _later(rng, p.created + 60 * DAY, 0.8) - 45 * DAY
        f = _Feature(f"FEAT-{i + 1}", p, base, created)
        p.feats.append(f)
        if variant is None:
            p.core.append(f)
        yield _feature_record(rng, f, variant)

    # Tests and bugs, interleaved in proportion to what is left of each.
    live = [p for p in products if p.feats]
    if not live:  # too few records for any feature: one per product instead
        live = products
        for p in products:
            f = _Feature(None, p, p.bases[0], p.created)
            p.feats, p.core = [f], [f]
    weights = list(accumulate(p.weight for p in live))
    tests_left, bugs_left, test_no, bug_no = n_tests, n_bugs, 0, 0
    while tests_left or bugs_left:
        p = live[bisect(weights, rng.random() * weights[-1])]
        pool = p.core if rng.random() < 0.55 else p.feats
        f = pool[int(len(pool) * rng.random() ** 1.3)]
        with_feature = f.key is not None and rng.random() < 0.94
        if rng.random() * (tests_left + bugs_left) < tests_left:
            tests_left -= 1
            test_no += 1
            yield _test_record(rng, f"TEST-{test_no}", f, with_feature)
        else:
            bugs_left -= 1
            bug_no += 1
            orig = f.bugs[int(rng.random() * len(f.bugs))] if f.bugs and rng.random() < 0.085 else None
            yield _bug_record(rng, f"BUG-{bug_no}", f, orig, with_feature)
