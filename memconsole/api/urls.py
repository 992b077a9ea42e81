from django.urls import path, re_path

from . import views

app_name = "api"
urlpatterns = [
    path("remember", views.remember, name="remember"),
    path("recall", views.recall, name="recall"),
    path("profile", views.profile, name="profile"),
    path("forget", views.forget, name="forget"),
    path("inject", views.inject, name="inject"),
    path("openapi.json", views.openapi_document, name="openapi"),
    re_path(r"^.*$", views.not_found, name="not_found"),
]
