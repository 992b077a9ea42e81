"""A believable demo workspace: 3 bots, group and private chats in both isolation modes, speakers
with profiles, ~3,000 episodes in English and Chinese, supersede chains and injection snapshots.

Deterministic (seeded), written through the same audit chain and vector index as real data.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from . import audit, lexical
from .audit import Actor
from .counters import recount
from .episodes import REMEMBERED
from .injection import record_injection
from .models import STATUS_ACTIVE, STATUS_ARCHIVED, STATUS_SUPERSEDED, Episode
from .paging import chunks
from .profiles import update_profile
from .scopes import ScopeKeys, derive_scope, register_scope
from .sync import index_episodes
from .wording import said

BOTS = [
    (
        "8c6e3f52-support-bot",
        "session",
        ["group_1001", "group_1002", "group_1003", "group_1004", "person_501", "person_502"],
    ),
    ("2b91d7a0-study-buddy", "session", ["group_2001", "group_2002", "person_601", "person_602", "person_603"]),
    ("e47a1c09-family-helper", "bot", ["group_3001", "group_3002", "person_701", "person_702"]),
]

EN_NAMES = [
    "Alice",
    "Bob",
    "Carmen",
    "David",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemal",
    "Lena",
    "Marco",
    "Nadia",
    "Oscar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sam",
    "Tariq",
]
ZH_NAMES = [
    "王伟",
    "李娜",
    "张敏",
    "刘洋",
    "陈静",
    "杨帆",
    "赵磊",
    "黄丽",
    "周杰",
    "吴芳",
    "徐强",
    "孙悦",
    "马超",
    "朱琳",
    "胡斌",
    "郭婷",
    "林峰",
    "何雪",
    "高翔",
    "罗佳",
]

EN_FACTS = [
    ("I'm planning a trip to {place} next month", ["travel", "plan"]),
    ("My favourite food is {food}", ["food", "preference"]),
    ("I work as a {job} and mostly do remote work", ["work", "fact"]),
    ("Our team meeting moved to {day} at 10am", ["work", "schedule"]),
    ("I have a dog called {pet} who loves long walks", ["pet", "fact"]),
    ("I'm learning {lang} and practise every evening", ["learning", "hobby"]),
    ("Please remind me about the {thing} deadline on {day}", ["reminder", "deadline"]),
    ("I don't eat {food} any more, I'm trying to eat healthier", ["food", "preference-change"]),
    ("My birthday is in {month}", ["personal", "fact"]),
    ("I prefer short answers with bullet points", ["preference", "style"]),
    ("The release of version {ver} is planned for {month}", ["project", "plan"]),
    ("I started running {n} kilometres on weekends", ["sport", "hobby"]),
    ("My sister is visiting from {place} in {month}", ["family", "plan"]),
    ("I am allergic to {food}", ["health", "fact"]),
    ("Can we move the {thing} review to {day}?", ["work", "schedule"]),
]
ZH_FACTS = [
    ("我下个月要去{zplace}旅行", ["travel", "plan"]),
    ("我最喜欢吃{zfood}", ["food", "preference"]),
    ("我们的周会改到{zday}上午十点", ["work", "schedule"]),
    ("我在学{zlang}，每天晚上练习半小时", ["learning", "hobby"]),
    ("请提醒我{zday}交{zthing}", ["reminder", "deadline"]),
    ("我养了一只猫，叫{zpet}", ["pet", "fact"]),
    ("我的生日在{zmonth}", ["personal", "fact"]),
    ("我对{zfood}过敏", ["health", "fact"]),
    ("周末我喜欢去公园跑步", ["sport", "hobby"]),
    ("我更喜欢简短的回答", ["preference", "style"]),
]
# A fact and its correction, keyed by the fact's template: (correction, tags, the word the correction
# changes, or None when it keeps the fact's words; {was} is that word's old value). Each supersede
# chain of the demo is one of these.
CORRECTIONS: dict[str, tuple[str, list[str], str | None]] = {
    "I'm planning a trip to {place} next month": (
        "Correction: the trip to {place} is the month after next, not next month",
        ["correction", "travel"],
        None,
    ),
    "My favourite food is {food}": (
        "Actually my favourite food is {food} now, not {was}",
        ["correction", "food"],
        "food",
    ),
    "Our team meeting moved to {day} at 10am": (
        "Update: the team meeting is on {day} now, not {was}",
        ["fact-update", "work"],
        "day",
    ),
    "I'm learning {lang} and practise every evening": (
        "Update: I stopped learning {was}, I'm learning {lang} now",
        ["fact-update", "learning"],
        "lang",
    ),
    "我最喜欢吃{zfood}": ("更正：我现在最喜欢吃{zfood}了，不是{was}", ["correction", "food"], "zfood"),
    "我们的周会改到{zday}上午十点": ("更新：周会从{was}改到{zday}了", ["fact-update", "work"], "zday"),
    "我下个月要去{zplace}旅行": ("更正：去{zplace}的旅行推迟到下下个月", ["correction", "travel"], None),
}
WORDS = {
    "place": ["Beijing", "Lisbon", "Kyoto", "Mexico City", "Cape Town", "Oslo", "Hanoi", "Buenos Aires"],
    "food": ["dumplings", "paella", "ramen", "tacos", "peanuts", "shellfish", "pizza", "curry"],
    "job": ["data engineer", "nurse", "teacher", "product designer", "translator", "accountant"],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"],
    "pet": ["Biscuit", "Luna", "Mochi", "Rex", "Pepper"],
    "lang": ["Spanish", "Japanese", "Mandarin", "German", "Portuguese"],
    "thing": ["budget", "design", "quarterly report", "grant", "thesis"],
    "month": ["January", "March", "May", "July", "September", "November"],
    "ver": ["2.0", "2.1", "3.0", "1.4"],
    "n": ["5", "8", "10", "12"],
    "zplace": ["北京", "上海", "成都", "西安", "杭州", "广州"],
    "zfood": ["饺子", "火锅", "小笼包", "花生", "海鲜", "面条"],
    "zday": ["周一", "周二", "周三", "周四", "周五"],
    "zlang": ["英语", "日语", "西班牙语", "法语"],
    "zthing": ["报告", "预算", "设计稿", "论文"],
    "zpet": ["咪咪", "小白", "团团"],
    "zmonth": ["三月", "五月", "八月", "十月", "十二月"],
}
TRAITS = [
    "curious",
    "direct",
    "friendly",
    "detail-oriented",
    "busy",
    "night owl",
    "early riser",
    "patient",
    "funny",
    "喜欢旅行",
    "认真",
]
PREFERENCES = [
    "short answers",
    "bullet points",
    "answers in Chinese",
    "answers in English",
    "no emojis",
    "examples first",
    "formal tone",
]
QUERIES = [
    "what are my travel plans?",
    "what food do I like?",
    "when is the team meeting?",
    "我喜欢吃什么？",
    "remind me of deadlines",
    "tell me about my pet",
]

EPISODES_PER_SCOPE = 200
INDEX_BATCH = 256


class DemoNotEmpty(Exception):
    pass


def _words(rng: random.Random) -> dict[str, str]:
    return {key: rng.choice(values) for key, values in WORDS.items()}


def _corrected_words(words: dict[str, str], changed: str | None, rng: random.Random) -> dict[str, str]:
    """The fact's own words, with `changed` (if any) replaced by another value and its old one as `was`."""
    if changed is None:
        return words
    others = [value for value in WORDS[changed] if value != words[changed]]
    return {**words, changed: rng.choice(others), "was": words[changed]}


def load_demo(force: bool = False, progress: Callable[[str], None] | None = None) -> dict[str, int]:
    """Create the demo workspace. Refuses a database that already holds episodes unless `force`."""
    if Episode.objects.exists() and not force:
        raise DemoNotEmpty("the database already holds memory; use --force to add the demo data anyway")
    say = progress or (lambda _: None)
    rng = random.Random(20261129)
    actor = Actor.system("load_demo")
    now = timezone.now()
    speakers = [(f"u{1000 + i}", name) for i, name in enumerate(EN_NAMES + ZH_NAMES)]
    totals = {"scopes": 0, "episodes": 0, "profiles": 0, "snapshots": 0}
    all_keys: list[tuple[ScopeKeys, list[tuple[str, str]]]] = []
    for bot_uuid, isolation, sessions in BOTS:
        for session_name in sessions:
            keys = derive_scope(bot_uuid, session_name, isolation)
            members = rng.sample(speakers, 6) if session_name.startswith("group_") else [rng.choice(speakers)]
            all_keys.append((keys, members))

    for number, (keys, members) in enumerate(all_keys, start=1):
        say(f"scope {number}/{len(all_keys)}: {keys.scope_key} ({keys.isolation})")
        created = _demo_episodes(keys, members, rng, actor, now)
        totals["episodes"] += created
        totals["scopes"] += 1
        update_profile(
            keys,
            actor,
            "session",
            name=f"{keys.session_name} chat",
            add_traits=rng.sample(TRAITS, 2),
            notes="Demo conversation. Members: " + ", ".join(n for _, n in members),
        )
        totals["profiles"] += 1
        for sender_id, name in members:
            update_profile(keys, actor, "speaker", sender_id, name=name, add_traits=rng.sample(TRAITS, 2))
            if rng.random() < 0.5:  # a second version, so history and rollback have something to show
                update_profile(keys, actor, "speaker", sender_id, add_preferences=rng.sample(PREFERENCES, 2))
            totals["profiles"] += 1
        for _ in range(4):
            sender_id, name = rng.choice(members)
            record_injection(
                keys,
                actor,
                rng.choice(QUERIES),
                query_id=f"demo-{rng.getrandbits(32):08x}",
                sender_id=sender_id,
                sender_name=name,
                top_k=3,
            )
            totals["snapshots"] += 1
    return totals


def _demo_episodes(
    keys: ScopeKeys, members: list[tuple[str, str]], rng: random.Random, actor: Actor, now: datetime
) -> int:
    rows: list[Episode] = []
    facts: list[tuple[str, dict[str, str]]] = []  # each row's template and words, for its correction
    with transaction.atomic():
        register_scope(keys)
        for position in range(EPISODES_PER_SCOPE):
            sender_id, name = rng.choice(members)
            chinese = name in ZH_NAMES
            template, tags = rng.choice(ZH_FACTS if chinese else EN_FACTS)
            age = timedelta(days=(EPISODES_PER_SCOPE - position) * rng.uniform(0.5, 2.0), minutes=rng.randint(0, 1440))
            importance = rng.choices([1, 2, 3, 4, 5], [2, 5, 3, 2, 1])[0]  # drawn before the content, as always
            words = _words(rng)
            facts.append((template, words))
            episode = Episode.create(
                keys,
                template.format(**words),
                tags=list(tags),
                importance=importance,
                timestamp=now - age,
                sender_id=sender_id,
                sender_name=name,
                source="agent",
                created_at=now - age,
                updated_at=now - age,
            )
            rows.append(episode)
        # A few supersede chains: a later correction replaces the fact it corrects.
        correctable = [n for n, (template, _words_) in enumerate(facts) if template in CORRECTIONS]
        for n in rng.sample(correctable, min(6, len(correctable))):
            old = rows[n]
            template, words = facts[n]
            correction_template, tags, changed = CORRECTIONS[template]
            first_said = old.timestamp or now
            timestamp = first_said + (now - first_said) * rng.uniform(0.3, 0.95)  # after the fact
            correction = Episode.create(
                keys,
                correction_template.format(**_corrected_words(words, changed, rng)),
                tags=list(tags),
                importance=3,
                timestamp=timestamp,
                sender_id=old.sender_id,
                sender_name=old.sender_name,
                source="agent",
                created_at=now,
                updated_at=now,
            )
            old.status, old.superseded_by, old.importance = (
                STATUS_SUPERSEDED,
                correction.episode_id,
                max(1, old.importance - 1),
            )
            rows.append(correction)
        for episode in rng.sample(rows, len(rows) // 12):
            if episode.status == STATUS_ACTIVE:
                episode.status = STATUS_ARCHIVED
        Episode.objects.bulk_create(rows, batch_size=500)
        lexical.index_episodes(rows)  # bulk_create sends no post_save, which indexes a saved row
        for episode in rows:
            audit.append(
                "remember",
                actor,
                scope_key=keys.scope_key,
                user_key=keys.user_key,
                sender_id=episode.sender_id,
                sender_name=episode.sender_name,
                target_type="episode",
                target_id=episode.episode_id,
                summary=said(REMEMBERED, content=episode.content),
                metadata={"source": "demo"},
            )
        recount(keys.user_key)
    stored = list(Episode.objects.in_scope(keys.user_key).with_ids([e.episode_id for e in rows]))
    for batch in chunks(stored, INDEX_BATCH):
        index_episodes(list(batch))
    return len(rows)
