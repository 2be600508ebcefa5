"""The benchmark queries the search harnesses share (search_bench, citus_bench, citus_ops_bench)."""

# A word every benchmark record holds (search_bench adds it to each description): the broadest query.
UNIVERSAL = "qaeverywhere"
QUERIES = [
    UNIVERSAL,
    "open",
    "test",
    "crash",
    "spinner",
    "refund",
    "timezone",
    "voiceover",
    "zoom",
    "vat",
    "payment fails",
    "app crashes on startup",
    "wrong total invoice",
    "season pass renewal",
    '"payment sheet"',
    "checko",
    "renewa",
    "offline ticket wallet",
    "dark mode contrast",
    "memory leak map",
    "500 error export",
    "duplicate charge card",
    "login session expired",
    "why does the app close when I renew my pass",
    "invoice total does not match the breakdown",
    "BUG-1432",
    "TEST-208",
    "open -android",
    "crash or freeze",
    f"{UNIVERSAL} crash",
]
# Citus's run asks the same, less those its report never listed.
CITUS_LEFT_OUT = frozenset(
    {"qaeverywhere", "TEST-208", "open", "crash or freeze", "vat", "test", "open -android", "renewa", "zoom"}
)
