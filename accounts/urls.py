from django.urls import path

from . import oidc, views

app_name = "accounts"
urlpatterns = [
    path("accounts/oidc/login", oidc.start, name="oidc_login"),
    path("accounts/oidc/callback", oidc.callback, name="oidc_callback"),
    path("tokens/", views.tokens_page, name="tokens"),
]
