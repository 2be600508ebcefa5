from django.db import migrations

#: Every text that search.indexing.embeddings.document_text now embeds differently holds one of these
#: (case aside): a user agent, a label and an id of 8+ hex digits, a time of day, a stack frame (JVM or
#: .NET, Python, JavaScript's line:column, Go's file.go:line), "... 12 more". A superset: a row matched
#: without cause is only embedded again.
CHANGED_TEXT = (
    r"(mozilla|opera|dalvik)/[0-9]|:[ \t]*[0-9a-f]{8}|[0-9]{2}:[0-9]{2}:[0-9]{2}"
    r'|\mat[ \t]+[^ \t\n(]+\(|file "[^"\n]*", line [0-9]|:[0-9]+:[0-9]+|\.go:[0-9]+|\.\.\. ?[0-9]+ more'
)

MARK_STALE = """
    UPDATE search_document SET embedding_hash = NULL
    WHERE embedding_hash IS NOT NULL AND (title || E'\\n' || body) ~* %s
"""


class Migration(migrations.Migration):
    """The embedded text changed (search.indexing.embeddings.document_text: no user agents, build id
    lines or log time stamps; a stack trace read as its top frames' names). content_hash is of the record's
    own text, which did not change, so mark stale the vectors of the rows whose embedded text did, as
    0008 did for all: the worker embeds them again, and their old vectors serve until then."""

    dependencies = [
        ("search", "0015_scoped_words"),
    ]

    operations = [
        migrations.RunSQL([(MARK_STALE, [CHANGED_TEXT])], migrations.RunSQL.noop),
    ]
