from django.urls import path

from . import views

app_name = "saved"
urlpatterns = [
    path("new", views.create, name="create"),
    path("<int:pk>/", views.open_search, name="open"),
    path("<int:pk>/edit", views.edit, name="edit"),
    path("<int:pk>/secret", views.new_secret, name="new_secret"),
    path("<int:pk>/delete", views.delete, name="delete"),
]
