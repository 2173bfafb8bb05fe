"""Playwright helpers: Debian's chromium with flags that work in containers and CI."""

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def log_in(page, username: str, password: str) -> None:
    """Log in through the real form and wait until the app has redirected away from it."""
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/login/" not in url)


class ConsoleLog:
    """What a page shows a developer as broken: console errors, any WebGL message (a lost context blanks a
    chart), uncaught exceptions, and requests that failed or got a 4xx/5xx answer.

    A test that opens a failing URL on purpose says so with allow("/teams/7/"): problems naming it are
    dropped. Chromium reports a failed load as a console error without its URL in the text, so each
    console message is recorded with the URL it came from.
    """

    def __init__(self) -> None:
        self._problems: list[str] = []
        self._allowed: list[str] = []

    def watch(self, page) -> None:
        page.on("console", self._console)
        page.on("pageerror", lambda error: self._problems.append(f"uncaught: {error}"))
        page.on("requestfailed", self._request_failed)
        page.on("response", self._response)

    def _console(self, message) -> None:
        if message.type == "error" or "webgl" in message.text.lower():
            where = message.location.get("url") or ""
            self._problems.append(f"console {message.type}: {message.text} ({where})")

    def _response(self, response) -> None:
        if response.status >= 400:
            self._problems.append(f"HTTP {response.status}: {response.url}")

    def _request_failed(self, request) -> None:
        failure = request.failure or ""
        if "ERR_ABORTED" not in failure:  # a navigation or htmx swap cancelled it: nothing broke
            self._problems.append(f"request failed ({failure}): {request.url}")

    def allow(self, fragment: str) -> None:
        self._allowed.append(fragment)

    @property
    def problems(self) -> list[str]:
        return [p for p in self._problems if not any(fragment in p for fragment in self._allowed)]
