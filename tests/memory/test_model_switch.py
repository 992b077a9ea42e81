"""A model switch never breaks recall (issue 16): the index is re-embedded beside the collections
still serving, recall answers throughout (a thread recalls while the re-embedding runs with the real
offline model), and the banner, /readyz and the API error name the model answering and the progress."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client

from memconsole.lib import embeddings, vectors
from memconsole.memory import episodes, health, modelswitch, reembed, retrieval, tokens
from memconsole.memory.audit import Actor
from memconsole.memory.embedding_state import EmbeddingState
from memconsole.memory.models import Episode
from memconsole.memory.scopes import derive_scope
from tests import processes
from tests.conftest import MODEL_DIR

SCRIPT = Path(__file__).resolve().parent / "scripts" / "model_switch.py"

FACTS = [
    "I am planning a trip to Beijing next month",
    "My favourite food is dumplings",
    "The team meeting moved to Thursday",
    "I need to renew my car insurance",
    "Our cat knocked over the plant again",
]


def seed(system, scopes: int = 3, per_scope: int = 40) -> list:
    keys = [derive_scope("bot-a", f"group_{n}", "session") for n in range(scopes)]
    for k in keys:
        for i in range(per_scope):
            episodes.remember(k, system, f"{FACTS[i % len(FACTS)]} (note {i})", sender_id=f"u{i % 3}")
    return keys


def install(tmp_path: Path, model_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a file-SQLite install under tmp_path (migrated on first use)."""
    env = processes.clean_env(
        MEMCONSOLE_VAR_DIR=tmp_path,
        DATABASE_URL=f"sqlite:///{tmp_path / 'switch.sqlite3'}",
        CHROMA_PATH=tmp_path / "chroma",
        MEMCONSOLE_MODEL_DIR=model_dir,
        SECRET_KEY="model-switch-test",
        MEMCONSOLE_REEMBED_LEASE_SECONDS="3",
        MEMCONSOLE_REEMBED_IN_BACKGROUND="false",  # the script runs `reembed.run` itself
        **extra,
    )
    if not (tmp_path / "switch.sqlite3").exists():
        subprocess.run(
            [sys.executable, str(processes.MANAGE), "migrate", "--noinput", "-v", "0"],
            env=env,
            cwd=processes.REPO,
            check=True,
            timeout=180,
        )
    return env


def script(env: dict[str, str], payload: dict) -> dict:
    done = processes.run_script(SCRIPT, env, payload, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_switching_the_model_keeps_recall_answering_throughout(tmp_path):
    """No model -> the model (once 503 forever), then the model -> another model id: a thread
    recalls over and over while the real offline model re-embeds; not one recall fails."""
    seeded = script(install(tmp_path, tmp_path / "no-model"), {"mode": "seed", "scopes": 3, "per_scope": 60})
    assert seeded == {"episodes": 180, "model": embeddings.FALLBACK_ID}

    env = install(tmp_path, MODEL_DIR)
    switched = script(env, {"mode": "switch", "scopes": 3, "batch": 16})
    assert switched["failures"] == [] and switched["failure_count"] == 0
    assert switched["recalls"] > 0 and switched["empty"] == 0
    assert switched["report"]["status"] == "complete" and switched["report"]["reembedded"] == 180
    after = script(env, {"mode": "check", "scopes": 3})
    assert not after["switching"] and after["row_models"] == after["collection_models"] == [after["state"]["model"]]
    assert after["state"]["model"].startswith("minilm-") and "Beijing" in after["recall"][0]
    assert not [name for name in after["collections"] if name.endswith(("_next", "_prev"))]

    env_b = install(tmp_path, MODEL_DIR, MEMCONSOLE_EMBEDDING_MODEL="paraphrase-multilingual-MiniLM-L12-v2")
    switched = script(env_b, {"mode": "switch", "scopes": 3, "batch": 16})
    assert switched["failure_count"] == 0 and switched["recalls"] > 0 and switched["empty"] == 0
    assert switched["report"]["status"] == "complete"
    after_b = script(env_b, {"mode": "check", "scopes": 3})
    assert after_b["state"]["model"].startswith("paraphrase-multilingual-minilm-l12-v2-")
    assert after_b["collection_models"] == [after_b["state"]["model"]]


def test_a_reembedding_killed_half_way_resumes_where_it_stopped(tmp_path):
    seeded = script(install(tmp_path, tmp_path / "no-model"), {"mode": "seed", "scopes": 2, "per_scope": 150})
    assert seeded["episodes"] == 300
    env = install(tmp_path, MODEL_DIR)
    child = subprocess.Popen(
        [sys.executable, str(SCRIPT)],
        cwd=processes.REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(json.dumps({"mode": "switch", "scopes": 2, "batch": 8}))
    child.stdin.close()
    progress = ""
    for line in child.stdout:
        if line.startswith("progress ") and int(line.split()[1].split("/")[0]) >= 80:
            progress = line
            break
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(30)
    assert progress, "the re-embedding never got going"
    assert '"reembedding"' in progress and '"percent"' in progress  # the state says how far it is

    killed = script(env, {"mode": "check", "scopes": 2})
    assert killed["switching"] and 80 <= killed["episodes_done"] < 300
    assert killed["state"]["model"] == embeddings.FALLBACK_ID  # still answered by the earlier index

    resumed = script(env, {"mode": "switch", "scopes": 2, "batch": 32})  # waits out the dead lease
    assert resumed["failure_count"] == 0 and resumed["report"]["status"] == "complete"
    assert resumed["report"]["reembedded"] <= 300 - killed["episodes_done"]  # continued, not restarted
    done = script(env, {"mode": "check", "scopes": 2})
    assert not done["switching"] and done["row_models"] == done["collection_models"] == [done["state"]["model"]]


@pytest.mark.django_db(transaction=True)
def test_model_to_no_model_keeps_recall_answering(system, settings, tmp_path):
    keys = seed(system, scopes=1, per_scope=20)
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "no-model"  # the model goes away
    assert modelswitch.current().switching
    assert retrieval.recall(keys[0], "Beijing trip", top_k=1)  # the lexical path answers
    assert reembed.run().status == "complete"
    assert retrieval.recall(keys[0], "Beijing trip", top_k=1)
    assert vectors.collection_model(keys[0].user_key) == embeddings.FALLBACK_ID


@pytest.mark.django_db(transaction=True)
def test_only_one_process_holds_the_lease(system, settings, tmp_path):
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "no-model"
    seed(system, scopes=1, per_scope=5)
    settings.MEMCONSOLE_MODEL_DIR = MODEL_DIR
    modelswitch.current()
    assert reembed.take_lease("another-process", 60)
    assert reembed.run().status == "busy"
    EmbeddingState.objects.filter(pk=1).update(lease_owner="")
    assert reembed.run().status == "complete"
    assert reembed.run().status == "current"


@pytest.mark.django_db(transaction=True)
def test_the_background_thread_finishes_the_switch_on_first_need(system, settings, tmp_path):
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "no-model"
    keys = seed(system, scopes=1, per_scope=10)
    settings.MEMCONSOLE_MODEL_DIR = MODEL_DIR
    settings.MEMCONSOLE_REEMBED_IN_BACKGROUND = True
    assert retrieval.recall(keys[0], "Beijing", top_k=1)  # the first need starts the thread
    thread = reembed.running_thread()
    assert thread is not None
    thread.join(120)
    modelswitch.forget()
    assert not modelswitch.current().switching
    assert vectors.collection_model(keys[0].user_key) == embeddings.current_model_id()


@pytest.mark.django_db
def test_model_a_to_model_b_serves_from_a_until_b_is_built_and_keeps_new_writes(system, settings):
    keys = seed(system, scopes=2, per_scope=10)
    model_a = embeddings.current_model_id()
    settings.MEMCONSOLE_EMBEDDING_MODEL = "paraphrase-multilingual-MiniLM-L12-v2"  # another model id
    model_b = embeddings.current_model_id()
    assert model_b != model_a and modelswitch.current().switching

    # Before any re-embedding: recall is answered by model A's collection, never a 503.
    assert modelswitch.query_vector(keys[0].user_key, "trip")[0] == model_a
    assert retrieval.recall(keys[0], "travel plans to Beijing", top_k=1)[0].episode.content.startswith("I am planning")
    assert model_a in modelswitch.describe() and model_b in modelswitch.describe()
    # A memory written during the switch is found at once (the serving collection gets it too).
    made = episodes.remember(keys[0], system, "My passport expires in June").episode
    assert made.vector_model == model_b
    assert retrieval.recall(keys[0], "passport expiry", top_k=1)[0].episode.episode_id == made.episode_id

    report = reembed.run(batch=4)

    assert report.status == "complete" and report.reembedded == 20  # the one written meanwhile was done
    assert vectors.collection_model(keys[0].user_key) == model_b
    assert retrieval.recall(keys[0], "passport expiry", top_k=1)[0].episode.episode_id == made.episode_id
    # erasure-style deletes reach every copy: nothing is left behind in a staging or previous one
    vectors.delete(keys[0].user_key, [made.episode_id])
    assert made.episode_id not in vectors.all_ids(keys[0].user_key)


# --- what the banner, /readyz and the API say during a switch ------------------------------------


@pytest.fixture
def mid_switch(system, settings, tmp_path):
    """A scope indexed without the model, then the model turned on: a switch at 0%."""
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "no-model"
    keys = seed(system, scopes=1, per_scope=4)
    settings.MEMCONSOLE_MODEL_DIR = MODEL_DIR
    state = modelswitch.current()
    assert state.switching
    return keys[0], state


@pytest.mark.django_db
def test_readyz_names_the_model_answering_and_the_progress(client, mid_switch):
    _, state = mid_switch
    body = client.get("/readyz").json()
    assert body["status"] == "ok"  # recall works: the install is ready
    assert body["embeddings"] == {
        "model": embeddings.FALLBACK_ID,
        "reembedding": {"to_model": state.model_id, "percent": 0},
    }
    reembed.run()
    modelswitch.forget()
    assert "embeddings" not in client.get("/readyz").json()


@pytest.mark.django_db
def test_the_console_banner_names_both_models_and_the_progress(viewer_client, mid_switch):
    _, state = mid_switch
    page = viewer_client.get("/").content.decode()
    assert "model-switch" in page and state.model_id in page and embeddings.FALLBACK_ID in page and "0%" in page
    reembed.run()
    modelswitch.forget()
    assert "model-switch" not in viewer_client.get("/").content.decode()


@pytest.mark.django_db
def test_an_api_503_during_a_switch_says_which_model_answers_and_how_far(mid_switch, settings):
    _, state = mid_switch
    _, secret = tokens.create_token("bot a", ["bot-a"], Actor.system("tests"))
    settings.CHROMA_HOST, settings.CHROMA_PORT = "127.0.0.1", 9  # the index goes down mid-switch
    vectors.reset_client()
    response = Client().post(
        "/api/v1/recall",
        data=json.dumps({"bot_uuid": "bot-a", "session_name": "group_0", "query": "Beijing trip"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 503
    message = response.json()["error"]["message"]
    assert "retry later" in message and state.model_id in message and embeddings.FALLBACK_ID in message
    assert "0% done" in message


@pytest.mark.django_db
def test_an_earlier_model_whose_files_are_gone_gives_way_to_what_is_reembedded(keys, system, settings):
    """The index was built by a model nobody has any more (its id names a file that is nowhere):
    recall searches the new model's copy, partial at first, and never answers 503."""
    gone = "minilm-0000000000000000"
    made = episodes.remember(keys, system, "I am planning a trip to Beijing next month").episode
    vectors.drop(keys.user_key)
    vectors.upsert(
        keys.user_key, gone, [made.episode_id], embeddings.embed([made.content]), [{"user_key": keys.user_key}]
    )
    Episode.objects.update(vector_model=gone)
    EmbeddingState.objects.update_or_create(pk=1, defaults={"model_id": gone, "model_dirs": {}})
    modelswitch.forget()
    state = modelswitch.current()
    assert state.switching and state.serving_model_id == gone
    # Found by an operator: /readyz, the banner and a 503 named the earlier model, which cannot load.
    assert modelswitch.status(state)["model"] == state.model_id
    assert gone not in modelswitch.describe(state) and gone not in modelswitch.error_note()

    assert modelswitch.query_vector(keys.user_key, "trip")[0] == state.model_id  # the new model's copy
    assert retrieval.recall(keys, "a trip to Beijing next month") is not None  # answers (lexical fills in)
    assert vectors.staging_model(keys.user_key) == state.model_id

    assert reembed.run().status == "complete"
    assert vectors.collection_model(keys.user_key) == state.model_id
    assert retrieval.recall(keys, "a trip to Beijing next month")[0].episode.episode_id == made.episode_id


@pytest.mark.django_db
def test_first_start_says_the_model_changed_and_that_the_server_reembeds(system, settings, tmp_path):
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "no-model"
    seed(system, scopes=1, per_scope=2)
    settings.MEMCONSOLE_MODEL_DIR = MODEL_DIR
    settings.VAR_DIR = tmp_path / "var"
    out = StringIO()
    call_command("first_start", stdout=out)
    text = out.getvalue()
    assert "The embedding model changed (lexical-fallback-v1 -> minilm-" in text
    assert "re-embeds the memory in the background (0% done)" in text


@pytest.mark.django_db
def test_a_health_check_run_with_another_model_setting_starts_no_switch(system, settings, tmp_path):
    """Found by an operator: a cron `memory_health` without the server's MEMCONSOLE_MODEL_DIR recorded
    a switch of the whole install to the lexical fallback, and the live server switched back."""
    seed(system, scopes=1, per_scope=5)
    recorded = modelswitch.current()
    assert not recorded.switching
    settings.MEMCONSOLE_MODEL_DIR = tmp_path / "no-model"  # this process only: the server keeps its model

    result = health.run_health_check(Actor.system("cron"), store=False)

    state = EmbeddingState.objects.get(pk=1)
    assert state.model_id == recorded.model_id and not state.switching
    embedding = next(check for check in result["checks"] if check["id"] == "embedding")
    assert embedding["status"] == "WARN" and "No switch was started from here" in embedding["detail"]
