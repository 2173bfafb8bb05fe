"""In chromium: a page heading and the action button beside it sit on one line (bounding boxes)."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(120)]


@pytest.mark.parametrize(
    ("path", "button"),
    [("/datasets/", "Upload a dataset"), ("/runs/", "New run"), ("/templates/", "New template")],
)
def test_the_action_button_is_centred_on_its_heading(page, login, member, path, button):
    login(member)
    page.goto(path)
    heading = page.get_by_role("heading", level=1).bounding_box()
    action = page.get_by_role("link", name=button, exact=True).bounding_box()
    centre = lambda box: box["y"] + box["height"] / 2  # noqa: E731
    assert abs(centre(action) - centre(heading)) <= 2, (heading, action)
