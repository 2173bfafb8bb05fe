"""Tool schema pages: list, detail with a "try it" form, create (optionally from a built-in preset), edit,
and the import of an MCP server's tools."""

import json

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from trainers.workbench_api import McpServerError
from workbench.accounts.access import role_at_least, team_role_required
from workbench.accounts.models import Role
from workbench.catalog import pages
from workbench.toolschemas import mcp, selectors, services
from workbench.toolschemas.forms import (
    McpImportForm,
    McpToolSchemaForm,
    ToolSchemaCreateForm,
    ToolSchemaForm,
    TryForm,
)
from workbench.toolschemas.models import Implementation

MCP_IMPORT_PAGE = "toolschemas/mcp_import.html"


def tool_schema_list(request):
    items = selectors.tool_schema_list(user=request.user, team=request.team)
    context = {
        "items": items,
        "can_write": role_at_least(request.team_role, Role.MEMBER),
        "builtins": services.builtin_names(),
    }
    return render(request, "toolschemas/list.html", context)


def tool_schema_detail(request, pk: int):
    item = selectors.tool_schema_get(user=request.user, pk=pk)
    version = selectors.tool_schema_version_get(item=item, number=pages.requested_version(request))
    example = {key: "" for key in version.parameters.get("required", [])}
    context = {
        **pages.detail_context(request, item=item, version=version),
        "spec_json": json.dumps(version.spec(), indent=2, ensure_ascii=False),
        "try_form": TryForm(initial={"arguments": json.dumps(example)}),
    }
    return render(request, "toolschemas/detail.html", context)


@require_POST
def tool_schema_try(request, pk: int, number: int):
    """htmx partial: run the tool with the posted arguments (members only: it executes code)."""
    item = selectors.tool_schema_get(user=request.user, pk=pk, min_role=Role.MEMBER)
    version = selectors.tool_schema_version_get(item=item, number=number)
    result = services.tool_schema_try(version=version, arguments_text=request.POST.get("arguments", ""))
    return render(request, "toolschemas/_try_result.html", {"result": result})


@team_role_required(Role.MEMBER)
def tool_schema_create(request):
    form = ToolSchemaCreateForm(request.POST or None, initial=_preset(request.GET.get("preset", "")))
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            version = services.tool_schema_create(
                team=request.team,
                user=request.user,
                name=data["name"],
                content=_content(data),
                note=data["note"],
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            return redirect(version.item)
    return render(
        request, "toolschemas/form.html", {"form": form, "item": None, "builtins": services.builtin_names()}
    )


def tool_schema_edit(request, pk: int):
    item = pages.editable(selectors.tool_schema_get(user=request.user, pk=pk, min_role=Role.MEMBER))
    latest = item.latest_version()
    if latest.implementation == Implementation.MCP:
        return _mcp_edit(request, item, latest)
    initial = {
        "function_name": latest.function_name,
        "description": latest.description,
        "parameters": latest.parameters,
        "implementation": latest.implementation,
        "builtin": latest.builtin,
        "url": latest.url,
        "timeout_s": latest.timeout_s,
    }
    form = ToolSchemaForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            services.tool_schema_update(
                item=item, user=request.user, content=_content(data), note=data["note"]
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            return redirect(item)
    return render(request, "toolschemas/form.html", {"form": form, "item": item})


def _mcp_edit(request, item, latest):
    """An imported MCP tool: its description and timeout; the pins stay (import again to change them)."""
    initial = {"description": latest.description, "timeout_s": latest.timeout_s}
    form = McpToolSchemaForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        content = services.ToolSchemaContent.of(
            latest, description=data["description"], timeout_s=data["timeout_s"]
        )
        try:
            services.tool_schema_update(item=item, user=request.user, content=content, note=data["note"])
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            return redirect(item)
    return render(request, "toolschemas/form.html", {"form": form, "item": item, "mcp": latest})


@team_role_required(Role.MEMBER)
def tool_schema_mcp_import(request):
    """The servers open to the team; with ?server=, that server's tools to import (listed live)."""
    name = request.POST.get("server") or request.GET.get("server")
    page = {"server": None, "servers": [], "form": None, "tools": [], "unavailable": ""}
    try:
        if not name:
            page["servers"] = selectors.mcp_servers_for(team=request.team)
        else:
            page["server"] = selectors.mcp_server_get(team=request.team, name=name)
            page["tools"] = mcp.mcp_tools_list(page["server"])
    except (
        McpServerError,
        mcp.McpUnavailable,
    ) as exc:  # a malformed server list; a server that cannot answer
        page["unavailable"] = str(exc)
    if page["server"] is None or page["unavailable"]:
        return render(request, MCP_IMPORT_PAGE, page)
    return _mcp_import_tools(request, page)


def _mcp_import_tools(request, page: dict):
    """The checkboxes of the server's tools; a valid POST imports the checked ones."""
    server = page["server"]
    form = page["form"] = McpImportForm(
        request.POST or None, tool_names=[tool.name for tool in page["tools"]]
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            saved = mcp.mcp_tools_import(
                team=request.team,
                user=request.user,
                server=server,
                names=data["tools"],
                prefix=data["prefix"],
            )
        except ValidationError as exc:
            form.add_error(None, exc)
        except mcp.McpUnavailable as exc:
            page["unavailable"] = str(exc)
        else:
            names = ", ".join(version.item.name for version in saved)
            messages.success(request, f"Imported from the MCP server {server.name}: {names}.")
            return redirect("toolschemas:list")
    return render(request, MCP_IMPORT_PAGE, page)


def _content(data: dict) -> services.ToolSchemaContent:
    return services.ToolSchemaContent(
        function_name=data["function_name"].strip(),
        description=data["description"],
        parameters=data["parameters"],
        implementation=data["implementation"],
        builtin=data["builtin"],
        url=data["url"],
        timeout_s=data["timeout_s"],
    )


def _preset(name: str) -> dict:
    """Initial form values copied from a built-in tool's own spec."""
    if name not in services.builtin_names():
        return {"implementation": Implementation.BUILTIN}
    spec = services.builtin_spec(name)
    return {
        "name": name,
        "function_name": spec["name"],
        "description": spec["description"],
        "parameters": spec["parameters"],
        "implementation": Implementation.BUILTIN,
        "builtin": name,
    }
