from django.contrib import admin
from django.urls import include, path

from accounts.forms import PasswordSignInForm
from accounts.views import admin_login
from connectors import views as connector_views

from . import health

admin.site.site_header = "QA Search curation"
admin.site.site_title = "QA Search admin"
admin.site.index_title = "Products, features, tests and bugs"
# The app list beside every page took 300 of 1280 pixels, and the bug list then scrolled
# sideways; the breadcrumbs and the home page lead everywhere it did.
admin.site.enable_nav_sidebar = False
admin.site.login_form = PasswordSignInForm

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/login/", admin_login),  # before the admin's own: one sign-in page once sign-on is set up
    path("admin/", admin.site.urls),
    path("api/", include("api.urls")),
    path("hooks/<str:kind>", connector_views.hook, name="hook"),
    path("", include("accounts.urls")),
    path("saved/", include("saved.urls")),
    path("", include("ui.urls")),
]
