"""The interactive API docs (/api/v1/docs) in Chromium, under the console's Content-Security-Policy:
Swagger UI loads from local static files (no CDN), fetches /api/v1/openapi.json, lists the API's
operations, and the browser records no CSP violation (tests/api/test_docs.py checks the page's HTML)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from memconsole.console.middleware import CONTENT_SECURITY_POLICY

from .conftest import Console, playwright_expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

expect = playwright_expect()

OPERATIONS = ["/remember", "/recall", "/profile", "/forget", "/inject"]
# Records what the page reports through the `securitypolicyviolation` event, from before any of its scripts run.
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(`${event.violatedDirective} blocked ${event.blockedURI || "inline"}`);
});
"""


def test_the_api_docs_work_under_the_csp(console: Console) -> None:
    page = console.page
    console.context.add_init_script(RECORD_VIOLATIONS)
    messages: list[str] = []
    page.on("console", lambda message: messages.append(f"{message.type}: {message.text}"))
    page_errors: list[str] = []
    page.on("pageerror", lambda error: page_errors.append(str(error)))
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(request.url))

    with page.expect_response(lambda response: urlsplit(response.url).path == "/api/v1/openapi.json") as document:
        response = console.goto("/api/v1/docs")
    assert response is not None and response.status == 200
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert document.value.status == 200 and document.value.json()["openapi"].startswith("3.1")

    expect(page.locator("#swagger-ui .information-container .title")).to_contain_text("memconsole")
    for path in OPERATIONS:
        expect(page.locator(".opblock-summary-path", has_text=path).first).to_be_visible()
    expect(page.locator(".opblock-summary-path[data-path='/remember']")).to_have_count(1)

    # Every asset came from the live server itself; Swagger UI's bundle and stylesheet from /static/ninja/.
    origins = {urlsplit(url)._replace(path="", query="", fragment="").geturl() for url in requested}
    assert origins == {console.base_url}, requested
    paths = {urlsplit(url).path for url in requested}
    assert {"/static/ninja/swagger-ui-bundle.js", "/static/ninja/swagger-ui-init.js"} <= paths
    assert "/static/ninja/swagger-ui.css" in paths
    assert failed == []
    assert page_errors == []
    violations: list[Any] = page.evaluate("() => window.__cspViolations")
    assert violations == [], violations
    assert not [text for text in messages if "Content Security Policy" in text], messages


def test_an_operation_of_the_docs_opens_with_its_schema(console: Console) -> None:
    page = console.page
    console.context.add_init_script(RECORD_VIOLATIONS)
    console.goto("/api/v1/docs")

    remember = page.locator(".opblock-summary-path[data-path='/remember']")
    remember.click()
    block = page.locator(".opblock.is-open")
    expect(block).to_have_count(1)
    expect(block.locator(".opblock-section-header").first).to_be_visible()
    expect(block.get_by_text("Try it out")).to_be_visible()
    expect(block.locator(".responses-table")).to_contain_text("201")
    assert page.evaluate("() => window.__cspViolations") == []
