from django.contrib.auth import views as auth_views
from django.urls import path
from django.views.generic import RedirectView

from accounts.views import SignIn

from . import report, triage, views, writing

app_name = "ui"
urlpatterns = [
    path("", RedirectView.as_view(pattern_name="ui:search"), name="home"),
    path("search/", views.search, name="search"),
    path("search/export", views.search_export, name="search_export"),
    path("records/<str:key>/", views.record, name="record"),
    path("records/<str:key>/duplicate", writing.mark_duplicate, name="mark_duplicate"),
    path("dashboard/", views.dashboard, name="dashboard"),
    path("bugs/new/", report.report_bug, name="report_bug"),
    path("triage/", triage.triage_run, name="triage"),
    path("triage/runs/<int:run>/decide", triage.decide, name="triage_decide"),
    # Browsers, feed readers and link previews ask for /favicon.ico whatever the page says.
    path("favicon.ico", views.favicon, name="favicon"),
    # The admin's form refuses users who are not staff, with a message that says so (accounts.forms).
    path("accounts/login/", SignIn.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="ui:login"), name="logout"),
]
