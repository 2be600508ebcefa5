from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from . import errors, runs, views, writes

app_name = "api"

# No trailing slashes, no format suffixes: a key may contain dots (org.apache.hadoop-12).
router = SimpleRouter(trailing_slash=False)
router.register("products", views.ProductViewSet, basename="product")
router.register("features", views.FeatureViewSet, basename="feature")
router.register("tests", views.QATestViewSet, basename="test")
router.register("bugs", views.BugViewSet, basename="bug")

urlpatterns = [
    path("search", views.SearchView.as_view(), name="search"),
    path("similar/<str:key>", views.SimilarView.as_view(), name="similar"),
    path("records", views.RecordsView.as_view(), name="records"),
    path("timeline/<str:key>", views.TimelineView.as_view(), name="timeline"),
    path("import", views.ImportView.as_view(), name="import"),
    # Before the router: its bugs/<key> would read check-duplicates as a key.
    path("bugs/check-duplicates", views.CheckDuplicatesView.as_view(), name="check-duplicates"),
    path("bugs/file", writes.FileBugView.as_view(), name="file-bug"),
    path("bugs/<str:key>/duplicate-of", writes.DuplicateOfView.as_view(), name="duplicate-of"),
    path("writes/<int:write>", writes.WriteView.as_view(), name="write"),
    path("writes/<int:write>/retry", writes.WriteActionView.as_view(action="retry"), name="write-retry"),
    path("writes/<int:write>/drop", writes.WriteActionView.as_view(action="drop"), name="write-drop"),
    path("runs", runs.RunsView.as_view(), name="runs"),
    path("runs/<int:run>", runs.RunView.as_view(), name="run"),
    path("runs/<int:run>/decisions", runs.DecisionsView.as_view(), name="run-decisions"),
    path("schema", views.SchemaView.as_view(), name="schema"),
    # The split view serves Swagger UI's start-up script from /api/docs?script
    # rather than inline, and the template keeps its style in a file: the page
    # lives under the site's Content-Security-Policy with no exception.
    path(
        "docs",
        # GET and HEAD only: an OPTIONS would render DRF's metadata through the page's template.
        views.DocsView.as_view(
            url_name="api:schema", template_name="api/swagger_ui.html", http_method_names=["get", "head"]
        ),
        name="docs",
    ),
    *router.urls,
    re_path(r"^", errors.not_found),  # anything else under /api/: a JSON 404
]
