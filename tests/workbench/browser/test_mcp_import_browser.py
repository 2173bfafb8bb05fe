"""In Debian's chromium: a member imports two tools from a running MCP server (the official SDK over
streamable HTTP) through the Tools catalog, and finds them in the catalog with their pinned server."""

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.support.mcp_processes import HttpMcpServer, http_mcp_server, servers_setting

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[HttpMcpServer]:
    with http_mcp_server() as running:
        yield running


def test_import_two_tools_from_an_mcp_server(page, login, member, mcp_server, settings, screenshot):
    settings.WORKBENCH_MCP_SERVERS = servers_setting(web={"url": mcp_server.url, "teams": ["alpha"]})
    login(member)
    page.goto("/tools/")
    page.get_by_role("link", name="Import from an MCP server").click()
    expect(page.locator("#mcp-servers")).to_contain_text(mcp_server.url)
    page.get_by_role("link", name="web", exact=True).click()
    expect(page.locator("#mcp-tools")).to_contain_text("Add two integers.")
    page.get_by_role("checkbox", name="add", exact=True).check()
    page.get_by_role("checkbox", name="echo", exact=True).check()
    screenshot("toolschema-mcp-import")
    page.get_by_role("button", name="Import").click()
    expect(page.locator(".messages")).to_contain_text("Imported from the MCP server web: add, echo.")
    listing = page.locator("#toolschema-list")
    expect(listing).to_contain_text("add")
    expect(listing).to_contain_text("echo")
    listing.get_by_role("link", name="add", exact=True).click()
    expect(page.locator("#spec")).to_contain_text('"name": "add"')
    expect(page.get_by_text("MCP server tool")).to_be_visible()
