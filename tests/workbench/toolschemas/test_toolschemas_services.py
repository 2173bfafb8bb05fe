import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from trainers.workbench_api import EGRESS_ERROR
from workbench.catalog.services import version_diff
from workbench.toolschemas import services
from workbench.toolschemas.services import ToolSchemaContent

CALC = services.builtin_spec("calculator")


def _calculator(**overrides) -> ToolSchemaContent:
    fields = {
        "function_name": "calculator",
        "description": CALC["description"],
        "parameters": CALC["parameters"],
        "implementation": "builtin",
        "builtin": "calculator",
        "timeout_s": 2.0,
    }
    return ToolSchemaContent(**{**fields, **overrides})


def test_builtin_choices_come_from_the_trainers_registry():
    assert {"calculator", "python", "search"} <= set(services.builtin_names())
    assert "http" not in services.builtin_names()


def test_create_and_binding(team, member):
    version = services.tool_schema_create(team=team, user=member, name="calc", content=_calculator())
    assert version.number == 1
    assert version.spec()["function"]["name"] == "calculator"
    assert version.binding() == {"name": "calculator", "config": {"timeout_s": 2.0}}


def test_invalid_json_schema_is_a_field_error(team, member):
    content = _calculator(parameters={"type": "object", "properties": {"x": {"type": 5}}})
    with pytest.raises(ValidationError) as exc:
        services.tool_schema_create(team=team, user=member, name="calc", content=content)
    assert exc.value.message_dict["parameters"][0].startswith("not a valid JSON Schema at properties/x/type")


def test_builtin_must_keep_its_own_name_and_http_needs_a_url(team, member):
    with pytest.raises(ValidationError) as exc:
        services.tool_schema_create(
            team=team, user=member, name="c", content=_calculator(function_name="calc")
        )
    assert exc.value.message_dict == {
        "function_name": ["A built-in tool is called by its own name: calculator."]
    }
    with pytest.raises(ValidationError) as exc:
        services.tool_schema_create(
            team=team, user=member, name="h", content=_calculator(implementation="http")
        )
    assert exc.value.message_dict == {"url": ["Give the endpoint's URL."]}


def test_duplicate_name_is_refused(team, member):
    services.tool_schema_create(team=team, user=member, name="calc", content=_calculator())
    with pytest.raises(ValidationError) as exc:
        services.tool_schema_create(team=team, user=member, name="calc", content=_calculator())
    assert "This team already has one with that name." in exc.value.messages


def test_viewer_cannot_create(team, viewer):
    with pytest.raises(PermissionDenied):
        services.tool_schema_create(team=team, user=viewer, name="calc", content=_calculator())


def test_edit_creates_version_two_and_diff_shows_it(team, member):
    first = services.tool_schema_create(team=team, user=member, name="calc", content=_calculator())
    second = services.tool_schema_update(
        item=first.item, user=member, content=_calculator(description="Adds numbers."), note="shorter"
    )
    first.refresh_from_db()
    assert (first.number, second.number) == (1, 2)
    assert first.description == CALC["description"]
    lines = {
        line.text for line in version_diff(old_text=first.canonical_text(), new_text=second.canonical_text())
    }
    assert '+      "description": "Adds numbers.",' in lines


def test_try_runs_the_calculator(team, member):
    version = services.tool_schema_create(team=team, user=member, name="calc", content=_calculator())
    result = services.tool_schema_try(version=version, arguments_text='{"expression": "6 * 7"}')
    assert (result.ok, result.output) == (True, "42")


def test_try_reports_bad_json_and_schema_mismatch(team, member):
    version = services.tool_schema_create(team=team, user=member, name="calc", content=_calculator())
    bad_json = services.tool_schema_try(version=version, arguments_text='{"expression": }')
    assert bad_json.error == "arguments are not valid JSON: Expecting value (line 1, column 16)"
    mismatch = services.tool_schema_try(version=version, arguments_text='{"expression": 3}')
    assert mismatch.error == "arguments do not match the schema: at expression: 3 is not of type 'string'"


def test_try_runs_python_in_the_sandbox(team, member):
    spec = services.builtin_spec("python")
    content = ToolSchemaContent(
        "python", spec["description"], spec["parameters"], "builtin", "python", timeout_s=20
    )
    version = services.tool_schema_create(team=team, user=member, name="py", content=content)
    ok = services.tool_schema_try(version=version, arguments_text='{"code": "print(6 * 7)"}')
    assert (ok.ok, ok.output.strip()) == (True, "42")
    failed = services.tool_schema_try(version=version, arguments_text='{"code": "1/0"}')
    assert not failed.ok and failed.error.strip().endswith("ZeroDivisionError: division by zero")


class _Echo(BaseHTTPRequestHandler):
    """A team's endpoint: echoes the arguments doubled, or answers slowly for /slow."""

    hits: list[str] = []

    def do_POST(self):
        _Echo.hits.append(self.path)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/slow":
            time.sleep(1.0)  # the caller has given up by now: nothing to answer
            return
        payload = json.dumps({"doubled": body["n"] * 2}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def unlisted_endpoint():
    """A team's endpoint on loopback, which the operator has not allowlisted."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def endpoint(unlisted_endpoint, settings):
    settings.WORKBENCH_EGRESS_ALLOW = [unlisted_endpoint.removeprefix("http://")]
    return unlisted_endpoint


def _http(url: str, timeout_s: float) -> ToolSchemaContent:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    return ToolSchemaContent("doubler", "Doubles n.", schema, "http", url=url, timeout_s=timeout_s)


def test_try_calls_an_http_endpoint(team, member, endpoint):
    version = services.tool_schema_create(team=team, user=member, name="d", content=_http(endpoint + "/", 5))
    result = services.tool_schema_try(version=version, arguments_text='{"n": 21}')
    assert (result.ok, result.output) == (True, '{"doubled": 42}')


def test_try_reports_an_http_timeout(team, member, endpoint):
    content = _http(endpoint + "/slow", 0.2)
    version = services.tool_schema_create(team=team, user=member, name="d", content=content)
    result = services.tool_schema_try(version=version, arguments_text='{"n": 1}')
    assert (result.ok, result.error) == (False, "doubler timed out after 0.2s")


def test_try_refuses_an_internal_endpoint_the_settings_do_not_allow(
    team, member, unlisted_endpoint, settings, monkeypatch
):
    settings.WORKBENCH_EGRESS_ALLOW = []
    # Workers read the variable; the web process follows its settings, which allow nothing here.
    monkeypatch.setenv("WORKBENCH_EGRESS_ALLOW", unlisted_endpoint.removeprefix("http://"))
    hits = len(_Echo.hits)
    live = services.tool_schema_create(team=team, user=member, name="d", content=_http(unlisted_endpoint, 5))
    refused = services.tool_schema_try(version=live, arguments_text='{"n": 1}')
    assert (refused.ok, refused.error, len(_Echo.hits)) == (False, f"doubler: {EGRESS_ERROR}", hits)

    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.1:9"]  # allowed, but nothing listens: the same words
    closed = services.tool_schema_create(
        team=team, user=member, name="c", content=_http("http://127.0.0.1:9", 5)
    )
    assert services.tool_schema_try(version=closed, arguments_text='{"n": 1}').error == refused.error
