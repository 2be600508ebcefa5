from django.db import migrations


class Migration(migrations.Migration):
    """The embedded text changed (search.indexing.embeddings.document_text: no links or
    markup, camel case split): mark every vector stale so the embedding
    worker redoes them. The old vectors serve until then."""

    dependencies = [
        ("search", "0007_search_words"),
    ]

    operations = [
        migrations.RunSQL("UPDATE search_document SET embedding_hash = NULL", migrations.RunSQL.noop),
    ]
