"""In Debian's chromium: log in, switch teams, team isolation, and a job's progress polled by htmx."""

import re

import pytest
from playwright.sync_api import expect

from workbench.accounts.models import Membership
from workbench.jobs.models import JobProgress

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def test_logged_out_visitor_is_sent_to_the_login_page(page):
    page.goto("/status/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/status/$"))
    expect(page.get_by_role("button", name="Log in")).to_be_visible()


def test_wrong_password_shows_an_error(page, member):
    page.goto("/login/")
    page.get_by_label("Username").fill(member.username)
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".errors")).to_contain_text("correct username and password")


def test_log_in_lands_on_home_with_the_team_nav_and_htmx(page, login, member, team):
    login(member)
    expect(page.locator("main")).to_contain_text(f"Current team: {team.name}")
    for section in ("Datasets", "Tools", "Templates", "Rewards", "Status"):
        expect(page.locator(".mainnav").get_by_role("link", name=section)).to_be_visible()
    assert page.evaluate("typeof window.htmx") == "object"  # served from our static files


def test_team_switcher_changes_the_current_team(page, login, member, other_team):
    Membership.objects.create(user=member, team=other_team, role="viewer")
    login(member)
    page.get_by_label("Current team").select_option(label=other_team.name)
    expect(page.locator("main")).to_contain_text(f"Current team: {other_team.name}")


def test_another_teams_user_cannot_open_the_first_teams_pages(
    page, login, outsider, member, team, console_log
):
    job = JobProgress.objects.create(team=team, kind="demo")
    login(outsider)
    for url in (f"/teams/{team.pk}/", f"/jobs/{job.pk}/progress/"):
        console_log.allow(url)  # the 404 is the point
        response = page.goto(url)
        assert response.status == 404, url
    page.goto("/teams/")
    expect(page.locator("main")).not_to_contain_text(team.name)


def test_admin_invites_and_the_invitee_accepts_in_the_team_pages(
    page, login, admin, team, make_user, screenshot
):
    newcomer = make_user("newcomer")
    login(admin)
    page.goto(f"/teams/{team.pk}/")
    page.get_by_label("Username").fill("newcomer")
    page.locator("form[action$='/invite/'] select[name=role]").select_option("viewer")
    page.get_by_role("button", name="Invite").click()
    expect(page.locator(".messages")).to_contain_text("they join when they accept")
    expect(page.locator("#members")).not_to_contain_text("newcomer")
    page.get_by_role("button", name="Log out").click()

    login(newcomer)
    expect(page.locator(".session .badge")).to_have_text("1")
    page.locator(".session").get_by_role("link", name="Teams").click()
    page.locator("#invitations").get_by_role("button", name="Accept").click()
    expect(page.locator(".messages")).to_contain_text(f"You joined {team.name} as viewer")
    assert Membership.objects.get(team=team, user=newcomer).role == "viewer"
    page.goto(f"/teams/{team.pk}/")
    expect(page.locator("#members")).to_contain_text("newcomer")
    screenshot("team-members")


@pytest.mark.services
def test_queue_check_on_the_status_page_polls_until_the_worker_answers(
    page, login, member, celery_worker, screenshot
):
    login(member)
    page.goto("/status/")
    expect(page.locator("#workers")).to_contain_text(celery_worker.hostname)
    page.get_by_role("button", name="rollout").click()
    job = page.locator("#queue-checks .job").first
    expect(job).to_have_attribute("data-status", "succeeded", timeout=30_000)
    expect(job).to_contain_text(f"Queue rollout answered by {celery_worker.hostname}")
    screenshot("status")


def test_pages_have_an_icon_and_log_nothing_broken(page, login, admin):
    # Our pages link the icon; the admin's do not, so chromium asks for /favicon.ico, which redirects to it.
    page.goto("/login/")
    icon = page.evaluate("fetch('/favicon.ico').then((r) => [r.status, r.headers.get('content-type')])")
    assert icon == [200, "image/svg+xml"]
    admin.is_staff = True
    admin.save()
    login(admin)
    page.goto("/admin/")
    expect(page.locator("#site-name")).to_be_visible()
    page.wait_for_load_state("networkidle")  # the icon request has answered; the fixture checks the console
