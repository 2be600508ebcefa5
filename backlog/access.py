"""Who may see and change which records: the one access rule, and the forms every reader takes it in.

The rule (`visible_product_ids`): a user sees and changes the records of the
products of their teams. A team is a Django group named in `Product.teams`;
superusers and holders of the `backlog.access_all_products` permission see
every product, and so does a call made on nobody's behalf (a management
command run by the operator). An inactive or anonymous user sees nothing.

Readers of records never decide this themselves; they take the rule as a
queryset filter (`visible`: the REST record endpoints, the staff UI, the
admin, import) or as SQL over the search index (`search.query.scope.access_scope`:
search, similar and the statistics their scores use). Both are built from
`visible_product_ids`, so the rule written here restricts every surface at
once. It only removes rows, never adds them.
"""

from functools import cache

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection, connections
from django.db.models import QuerySet

from .models import Product

ALL_PRODUCTS = "backlog.access_all_products"
# What anyone else who tries to add a product is told (REST, import).
ADDS_PRODUCTS = (
    "only someone who sees every product (a superuser, or the access_all_products permission) adds products; "
    "ask them to add the product and put it on your team"
)


MODEL_BACKEND_ONLY = ["django.contrib.auth.backends.ModelBackend"]


def active_user(pk):
    """The active user `pk` (None: none), as `read_user` reads one. For a caller
    that reads its user afresh on every call (the MCP tools over stdio: a
    deactivation or a changed team holds from the next call on), so it is kept
    cheap: 0.31 ms in all against 0.87 for the ORM's reads on a 2-core machine
    under load."""
    users = get_user_model()
    table, pk_column = users._meta.db_table, users._meta.pk.column
    found = read_user([], f"FROM {table} u WHERE u.{pk_column} = %(pk)s AND u.is_active", {"pk": pk})
    return found and found[1]


def read_user(leading: list[str], tail: str, params: dict):
    """(the `leading` columns' values, the user) of the first row of `SELECT
    <leading>, <the user u> <tail>`, or None when no row matches. `tail` is the
    statement from FROM on and names the user table `u`.

    The user comes with `holds_all_products`, whether they hold ALL_PRODUCTS
    themselves or through a group, in the same statement: what Django's
    ModelBackend reads in two more, each an ORM query dearer than this whole
    one (an EXISTS the planner plans in a quarter of a millisecond, read with a
    plain cursor: a raw queryset costs as much again as the statement). With
    another authentication backend, which may grant the permission its own
    way, that is not read, and has_perm asks the backend."""
    users = get_user_model()
    alias = users.objects.db
    fields = users._meta.concrete_fields
    columns = [*leading, *(f"u.{connection.ops.quote_name(field.column)}" for field in fields)]
    holds = list(settings.AUTHENTICATION_BACKENDS) == MODEL_BACKEND_ONLY
    if holds:
        columns.append(_holds_all_products_sql())
        app_label, codename = ALL_PRODUCTS.split(".")
        params = {**params, "app_label": app_label, "codename": codename}
    with connections[alias].cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(columns)} {tail}", params)
        row = cursor.fetchone()
    if row is None:
        return None
    user = users.from_db(alias, [field.attname for field in fields], row[len(leading) : len(leading) + len(fields)])
    if holds:
        user.holds_all_products = row[-1]
    return row[: len(leading)], user


@cache
def _holds_all_products_sql() -> str:
    users = get_user_model()
    direct, groups = users.user_permissions.through, users.groups.through
    granted = Group.permissions.through
    user_column = direct._meta.get_field(users._meta.model_name).column
    member_column = groups._meta.get_field(users._meta.model_name).column
    return f"""EXISTS (
            SELECT 1 FROM {Permission._meta.db_table} p
            JOIN {ContentType._meta.db_table} t ON t.id = p.content_type_id
            WHERE t.app_label = %(app_label)s AND p.codename = %(codename)s AND (
                p.id IN (SELECT d.permission_id FROM {direct._meta.db_table} d WHERE d.{user_column} = u.id)
                OR p.id IN (
                    SELECT g.permission_id FROM {groups._meta.db_table} m
                    JOIN {granted._meta.db_table} g ON g.group_id = m.group_id WHERE m.{member_column} = u.id
                )
            )
        ) AS holds_all_products"""


def sees_all_products(user) -> bool:
    """Whether `user` (None: the operator) sees every product, those to come included."""
    if user is None:
        return True
    if not user.is_active:
        return False
    holds = getattr(user, "holds_all_products", None)  # read with the user (active_user)
    return bool(user.is_superuser or (holds if holds is not None else user.has_perm(ALL_PRODUCTS)))


def visible_product_ids(user) -> list[int] | None:
    """Ids of the products whose records `user` may see and change; None: all of them.

    Read afresh on every call (one indexed query): a user taken off a team
    loses the team's products on their next request, even in a long-lived
    MCP session.
    """
    if sees_all_products(user):
        return None
    if not (user.is_authenticated and user.is_active):
        return []
    return list(Product.objects.filter(teams__user=user).values_list("id", flat=True).distinct().order_by("id"))


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


class SeesAllProductsOnly:
    """A ModelAdmin mixin: its pages for those who see every product only (what
    it lists, a source or the audit trail, spans every product)."""

    def has_module_permission(self, request):
        return sees_all_products(request.user) and super().has_module_permission(request)

    def has_view_permission(self, request, obj=None):
        return sees_all_products(request.user) and super().has_view_permission(request, obj)

    def has_add_permission(self, request):
        return sees_all_products(request.user) and super().has_add_permission(request)

    def has_change_permission(self, request, obj=None):
        return sees_all_products(request.user) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return sees_all_products(request.user) and super().has_delete_permission(request, obj)
