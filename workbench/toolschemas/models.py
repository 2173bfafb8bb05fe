"""Tool schemas: an OpenAI-style function spec bound to a built-in tool, an HTTP endpoint, a tool of an
operator-listed MCP server (imported, with its input schema pinned by hash) or an environment server
(OpenEnv's reset/step/state protocol: one episode per trajectory)."""

import json

from django.db import models
from django.urls import reverse

from workbench.catalog.models import CatalogItem, CatalogVersion
from workbench.toolschemas.specs import function_spec


class Implementation(models.TextChoices):
    BUILTIN = "builtin", "Built-in tool of the trainers library"
    HTTP = "http", "HTTP endpoint"
    MCP = "mcp", "MCP server tool"
    ENV_SERVER = "env_server", "Environment server (reset/step/state)"


class ToolSchema(CatalogItem):
    list_url_name = "toolschemas:list"

    def get_absolute_url(self) -> str:
        return reverse("toolschemas:detail", args=[self.pk])


class ToolSchemaVersion(CatalogVersion):
    item = models.ForeignKey(ToolSchema, on_delete=models.PROTECT, related_name="versions")
    function_name = models.CharField(max_length=64)  # what the model writes in a call
    description = models.TextField()
    parameters = models.JSONField()
    implementation = models.CharField(max_length=10, choices=Implementation.choices)
    builtin = models.CharField(max_length=50, blank=True)  # a name in trainers.tools.TOOLS
    url = models.URLField(blank=True)
    timeout_s = models.FloatField(default=10.0)
    mcp_server = models.CharField(max_length=64, blank=True)  # a server name in WORKBENCH_MCP_SERVERS
    mcp_tool = models.CharField(max_length=255, blank=True)  # the server's own name for the tool
    schema_hash = models.CharField(max_length=64, blank=True)  # the input schema's hash at import
    env_actions = models.JSONField(default=list, blank=True)  # the actions an environment server lists

    class Meta(CatalogVersion.Meta):
        pass

    def spec(self) -> dict:
        """The function spec shown to the model in the prompt."""
        return function_spec(
            name=self.function_name, description=self.description, parameters=self.parameters
        )

    def binding(self) -> dict:
        """A `trainers.tools.ToolBinding` (name + config) that builds the implementation."""
        if self.implementation == Implementation.HTTP:
            config = {
                "url": self.url,
                "name": self.function_name,
                "description": self.description,
                "parameters": self.parameters,
                "timeout_s": self.timeout_s,
            }
            return {"name": "http", "config": config}
        if self.implementation == Implementation.MCP:
            return {"name": "mcp", "config": self._mcp_config()}
        if self.implementation == Implementation.ENV_SERVER:
            return {"name": "env_server", "config": self._env_server_config()}
        return {"name": self.builtin, "config": {"timeout_s": self.timeout_s}}

    def _mcp_config(self) -> dict:
        """The mcp tool's config; the run's team is added by the operator bounds, never stored here."""
        return {
            "server": self.mcp_server,
            "tool": self.mcp_tool,
            "name": self.function_name,
            "description": self.description,
            "parameters": self.parameters,
            "schema_hash": self.schema_hash,
            "timeout_s": self.timeout_s,
        }

    def _env_server_config(self) -> dict:
        """The env_server tool's config: with the server's actions, a call may take several (as the
        built-in games), and the argument schema is the one the tool builds from them."""
        config = {"url": self.url, "name": self.function_name, "description": self.description,
                  "timeout_s": self.timeout_s}  # fmt: skip
        if self.env_actions:
            return {**config, "actions": list(self.env_actions)}
        return {**config, "parameters": self.parameters}

    def canonical_text(self) -> str:
        content = {"spec": self.spec(), "implementation": self.implementation, "binding": self.binding()}
        return json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False)
