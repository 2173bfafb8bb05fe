from django.contrib.auth import views as auth_views
from django.urls import include, path

from workbench.accounts import views

team_patterns = [
    path("", views.team_list, name="team_list"),
    path("switch/", views.team_switch, name="team_switch"),
    path("<int:pk>/", views.team_detail, name="team_detail"),
    path("<int:pk>/invite/", views.invitation_create, name="invitation_create"),
    path("invitations/<int:pk>/accept/", views.invitation_accept, name="invitation_accept"),
    path("invitations/<int:pk>/decline/", views.invitation_decline, name="invitation_decline"),
    path("members/<int:pk>/role/", views.membership_change_role, name="membership_change_role"),
    path("members/<int:pk>/remove/", views.membership_remove, name="membership_remove"),
]

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("teams/", include((team_patterns, "accounts"))),
]
