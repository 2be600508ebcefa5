from django.contrib import admin
from django.urls import include, path

admin.site.site_header = "QA Search curation"
admin.site.site_title = "QA Search admin"
admin.site.index_title = "Products, features, tests and bugs"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("api.urls")),
    path("", include("ui.urls")),
]
