"""Forms of the agent program app."""

from django import forms

from trainers.workbench_api import MAX_AGENT_PROGRAM_CHARS


class AgentProgramForm(forms.Form):
    source = forms.CharField(
        max_length=MAX_AGENT_PROGRAM_CHARS,
        widget=forms.Textarea(attrs={"rows": 24, "class": "code", "spellcheck": "false"}),
        strip=False,
        help_text="Python with a top-level run(task, client); client is an openai.OpenAI client on the"
        " episode's session. It runs in the sandbox (docs/agents.md).",
    )
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    note = forms.CharField(max_length=200, required=False, help_text="What changed in this version.")


class AgentProgramCreateForm(AgentProgramForm):
    name = forms.CharField(max_length=100)
    field_order = ["name"]
