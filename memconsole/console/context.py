"""Context every console page shares: the model-switch banner (memory/reembed.py)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from memconsole.memory import reembed


def model_switch(request: HttpRequest) -> dict[str, Any]:
    """`model_switch_banner`: evaluated only when base.html shows it (a signed-in user's page)."""
    return {"model_switch_banner": reembed.banner}
