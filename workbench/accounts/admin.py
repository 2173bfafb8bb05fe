from django.contrib import admin

from workbench.accounts.models import Invitation, Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["invitee", "team", "role", "status", "inviter", "created_at"]
    list_filter = ["status", "role"]
