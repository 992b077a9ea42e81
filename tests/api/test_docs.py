"""/api/v1/docs: Swagger UI for the generated document, from local files, under the console's CSP."""

from __future__ import annotations

import json
import re

from django.contrib.staticfiles import finders

from memconsole.console.middleware import CONTENT_SECURITY_POLICY


def test_it_serves_the_docs_page_from_local_files_under_the_csp(client):
    response = client.get("/api/v1/docs")

    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    assert response["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    page = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert assets and all(asset.startswith("/static/ninja/") for asset in assets), assets
    for asset in assets:
        assert finders.find(asset.removeprefix("/static/")), asset
    # No inline script runs (script-src 'self'): the only inline script is the JSON settings block.
    inline = re.findall(r"<script(?![^>]*\bsrc=)([^>]*)>", page)
    assert inline == [' type="application/json" id="swagger-settings"']
    settings_block = re.search(r'id="swagger-settings">(.*?)</script>', page, re.S).group(1)
    assert json.loads(settings_block)["url"] == "/api/v1/openapi.json"
    assert "style=" not in page and "<style" not in page  # style-src 'self'


def test_it_answers_other_methods_on_the_docs_with_json_405(client):
    response = client.post("/api/v1/docs")

    assert response.status_code == 405 and response["Content-Type"] == "application/json"
    assert response["Allow"] == "GET"
    assert response.json()["error"]["code"] == "method_not_allowed"
