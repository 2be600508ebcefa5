"""Which records a user may see: the one access rule, and the two forms every reader takes it in.

The rule is `visible_product_ids`: a user sees the records of some products,
or of all of them. Readers of records never decide this themselves; they
take it as a queryset filter (`visible`, for the ORM: the REST record
endpoints, the staff UI) or as SQL over the search index
(`search.scope.access_scope`: search and similar; `get` and `timeline`
use `visible` on the search index). Both are
built from `visible_product_ids`, so a rule written there restricts every
surface at once. The rule only removes rows, never adds them.
"""

from django.db.models import QuerySet

from .models import Product


def visible_product_ids(user) -> list[int] | None:
    """Ids of the products whose records `user` may see; None: all of them.

    Everyone sees everything today. A product-membership rule (a user sees
    the products of their teams, say) goes here and nowhere else; `user` may
    be None (a management command, or a call made on nobody's behalf).
    """
    return None


def visible(queryset: QuerySet, user) -> QuerySet:
    """`queryset` (of products, features, tests, bugs or search documents) cut to what `user` may see."""
    ids = visible_product_ids(user)
    if ids is None:
        return queryset
    column = "id" if queryset.model is Product else "product_id"
    return queryset.filter(**{f"{column}__in": ids})


def can_see(record, user) -> bool:
    """Whether `user` may see one record already loaded (a product, feature, test or bug)."""
    ids = visible_product_ids(user)
    return ids is None or (record.pk if isinstance(record, Product) else record.product_id) in ids
