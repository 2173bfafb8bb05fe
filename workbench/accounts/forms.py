from django import forms

from workbench.accounts.models import Role


class TeamCreateForm(forms.Form):
    name = forms.CharField(max_length=100)


class InvitationForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Role.choices, initial=Role.MEMBER)


class MembershipRoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)
