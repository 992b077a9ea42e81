"""Deterministic, realistic episode texts and queries for the benchmarks.

Episodes read like what a chat bot's memory plugin stores: one or two sentences about a speaker
(plans, preferences, facts, corrections), 10-60 words, about one in eight in Chinese. Texts come
from a fixed-seed stream, so the first N texts are the same whatever N is asked for: an embedding
cache made for 100,000 texts serves any smaller run.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

CORPUS_VERSION = "c1"
SEED = 20261129

FIRST = [
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
    "Uma",
    "Victor",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zoe",
    "Amara",
    "Bruno",
    "Chloe",
    "Dmitri",
    "Esra",
    "Felix",
    "Giulia",
    "Hamid",
    "Ivy",
    "Jakub",
]
LAST = [
    "Ng",
    "Silva",
    "Okafor",
    "Berg",
    "Tanaka",
    "Moreau",
    "Kowalski",
    "Haddad",
    "Larsen",
    "Costa",
    "Ivanova",
    "Reyes",
]
ZH_NAMES = ["王伟", "李娜", "张敏", "刘洋", "陈静", "杨帆", "赵磊", "黄丽", "周杰", "吴芳", "徐强", "孙悦"]

WORDS = {
    "place": [
        "Beijing",
        "Lisbon",
        "Kyoto",
        "Mexico City",
        "Cape Town",
        "Oslo",
        "Hanoi",
        "Buenos Aires",
        "Seoul",
        "Marrakesh",
        "Vancouver",
        "Tbilisi",
        "Edinburgh",
        "Bangalore",
        "Reykjavik",
        "Istanbul",
        "Lima",
        "Sydney",
    ],
    "food": [
        "dumplings",
        "paella",
        "ramen",
        "tacos",
        "peanuts",
        "shellfish",
        "pizza",
        "curry",
        "pho",
        "falafel",
        "sushi",
        "goulash",
        "pierogi",
        "kimchi stew",
        "lasagne",
        "dal",
        "empanadas",
        "gluten",
    ],
    "job": [
        "data engineer",
        "nurse",
        "teacher",
        "product designer",
        "translator",
        "accountant",
        "civil engineer",
        "barista",
        "researcher",
        "lawyer",
        "electrician",
        "pharmacist",
        "game developer",
        "journalist",
    ],
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "pet": ["Biscuit", "Luna", "Mochi", "Rex", "Pepper", "Noodle", "Ziggy", "Olive", "Tofu", "Bear"],
    "animal": ["dog", "cat", "rabbit", "parrot", "hamster", "tortoise"],
    "lang": ["Spanish", "Japanese", "Mandarin", "German", "Portuguese", "Korean", "Arabic", "Italian", "Swahili"],
    "thing": [
        "budget",
        "design",
        "quarterly report",
        "grant",
        "thesis",
        "tax return",
        "visa application",
        "pull request",
        "conference talk",
        "insurance claim",
        "lease renewal",
        "onboarding plan",
    ],
    "month": [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ],
    "ver": ["2.0", "2.1", "3.0", "1.4", "4.2", "0.9"],
    "n": ["3", "5", "8", "10", "12", "15", "21"],
    "sport": ["running", "climbing", "swimming", "badminton", "cycling", "yoga", "tennis", "rowing"],
    "hobby": ["watercolour painting", "chess", "baking sourdough", "birdwatching", "pottery", "guitar", "photography"],
    "project": [
        "billing service",
        "mobile app",
        "data pipeline",
        "website redesign",
        "search ranking",
        "onboarding flow",
    ],
    "tool": ["Postgres", "Kubernetes", "Figma", "Excel", "Rust", "Django", "Blender", "Notion"],
    "rel": ["sister", "brother", "mother", "father", "cousin", "best friend", "partner", "grandmother"],
    "time": ["7am", "9am", "10:30", "noon", "3pm", "6pm", "8pm"],
}
ZH_WORDS = {
    "zplace": ["北京", "上海", "成都", "西安", "杭州", "广州", "厦门", "昆明"],
    "zfood": ["饺子", "火锅", "小笼包", "花生", "海鲜", "面条", "烤鸭", "麻辣烫"],
    "zday": ["周一", "周二", "周三", "周四", "周五", "周六", "周日"],
    "zlang": ["英语", "日语", "西班牙语", "法语", "德语"],
    "zthing": ["报告", "预算", "设计稿", "论文", "合同"],
    "zpet": ["咪咪", "小白", "团团", "豆豆"],
    "zmonth": ["三月", "五月", "八月", "十月", "十二月"],
    "zsport": ["跑步", "游泳", "羽毛球", "爬山"],
}

EN_TEMPLATES = [
    ("{who} is planning a trip to {place} in {month} and wants hotel tips near the old town.", ["travel", "plan"]),
    ("{who} said their favourite food is {food}, especially on {day} evenings with friends.", ["food", "preference"]),
    ("{who} works as a {job} and mostly works remotely, with a team standup at {time}.", ["work", "fact"]),
    ("The {project} meeting moved to {day} at {time}; {who} asked the bot to remind the group.", ["work", "schedule"]),
    ("{who} has a {animal} called {pet} who needs medicine twice a day until the end of {month}.", ["pet", "fact"]),
    ("{who} is learning {lang} and practises every evening for about {n} minutes.", ["learning", "hobby"]),
    (
        "Reminder for {who}: the {thing} is due on {day}, and the draft should go to the team first.",
        ["reminder", "deadline"],
    ),
    ("{who} no longer eats {food}; they are trying to eat healthier this year.", ["food", "preference-change"]),
    ("{who}'s birthday is in {month}; the group wants to organise a surprise dinner.", ["personal", "fact"]),
    ("{who} prefers short answers with bullet points and no emojis.", ["preference", "style"]),
    (
        "Version {ver} of the {project} is planned for {month}, after the {tool} migration is finished.",
        ["project", "plan"],
    ),
    ("{who} started {sport} {n} times a month and is training for a race in {place}.", ["sport", "hobby"]),
    ("{who}'s {rel} is visiting from {place} in {month} and staying for {n} days.", ["family", "plan"]),
    ("{who} is allergic to {food} and asked the bot to warn them when recipes include it.", ["health", "fact"]),
    (
        "{who} asked to move the {thing} review to {day} because of a clash with the {project} demo.",
        ["work", "schedule"],
    ),
    ("{who} recommended {tool} for the {project} and offered to pair on it on {day}.", ["work", "tool"]),
    ("{who} took up {hobby} last {month} and shares photos in the group every {day}.", ["hobby"]),
    ("{who} is moving to {place} in {month} for a new job as a {job}.", ["personal", "plan"]),
    (
        "The group agreed that {who} will book the restaurant for {day} at {time}; budget about {n}0 euros each.",
        ["plan", "group"],
    ),
    ("{who} had trouble with the {tool} setup and the {project} build failed twice on {day}.", ["work", "issue"]),
    ("{who} asked for a summary of the {thing} discussion before {day} {time}.", ["request"]),
    ("{who} mentioned that {pet} the {animal} got lost in the park but was found the next morning.", ["pet", "story"]),
]
CORRECTIONS = [
    ("Correction from {who}: the trip to {place} is in {month}, not next month.", ["correction", "travel"]),
    ("{who} clarified that their favourite food is now {food}.", ["clarification", "food"]),
    ("Update: {who} says the {project} meeting is on {day} at {time} from now on.", ["fact-update", "work"]),
]
ZH_TEMPLATES = [
    ("{who}下个月要去{zplace}旅行，想找离老城近的酒店。", ["travel", "plan"]),
    ("{who}最喜欢吃{zfood}，尤其是周末和朋友一起。", ["food", "preference"]),
    ("我们的周会改到{zday}上午十点，{who}请机器人提醒大家。", ["work", "schedule"]),
    ("{who}在学{zlang}，每天晚上练习半小时。", ["learning", "hobby"]),
    ("请提醒{who}在{zday}之前交{zthing}。", ["reminder", "deadline"]),
    ("{who}养了一只猫，叫{zpet}，最近在看兽医。", ["pet", "fact"]),
    ("{who}的生日在{zmonth}，大家想给他一个惊喜。", ["personal", "fact"]),
    ("{who}对{zfood}过敏，点菜时要注意。", ["health", "fact"]),
    ("{who}周末喜欢去{zplace}附近{zsport}。", ["sport", "hobby"]),
]
EXTRA = [
    " They also mentioned it twice last week.",
    " This came up during the {day} call.",
    " Nobody objected in the chat.",
    " The bot confirmed it would keep this in mind.",
    " {who} seemed quite stressed about it.",
    " Follow up in {month} if nothing changes.",
    "",
    "",
    "",
]
QUERY_TEMPLATES = [
    "What are {who}'s travel plans?",
    "what food does {who} like",
    "When is the {project} meeting?",
    "Does anyone have a {animal}?",
    "remind me of the {thing} deadline",
    "who is learning {lang}",
    "is {who} allergic to anything",
    "when is {who}'s birthday",
    "who is visiting from {place}",
    "what happened with the {tool} setup",
    "{who}喜欢吃什么？",
    "restaurant booking for {day}",
    "which hobby did {who} take up",
    "release date for version {ver}",
]


@dataclass(frozen=True)
class Speaker:
    sender_id: str
    name: str


SPEAKERS = [
    Speaker(f"u{1000 + i}", f"{first} {last}") for i, (first, last) in enumerate((f, ln) for ln in LAST for f in FIRST)
] + [Speaker(f"z{2000 + i}", name) for i, name in enumerate(ZH_NAMES)]


@dataclass(frozen=True)
class Text:
    content: str
    tags: list[str]
    speaker: Speaker
    importance: int


def _fill(template: str, rng: random.Random, who: str) -> str:
    values = {key: rng.choice(choices) for key, choices in WORDS.items()}
    values.update({key: rng.choice(choices) for key, choices in ZH_WORDS.items()})
    values["who"] = who
    return template.format(**values)


def texts(count: int, seed: int = SEED) -> Iterator[Text]:
    """The first `count` episode texts of the stream (the same prefix for every count)."""
    rng = random.Random(seed)
    for _ in range(count):
        speaker = rng.choice(SPEAKERS)
        roll = rng.random()
        if speaker.sender_id.startswith("z"):
            template, tags = rng.choice(ZH_TEMPLATES)
            content = _fill(template, rng, speaker.name)
        else:
            template, tags = rng.choice(CORRECTIONS if roll < 0.04 else EN_TEMPLATES)
            content = _fill(template, rng, speaker.name.split()[0]) + _fill(
                rng.choice(EXTRA), rng, speaker.name.split()[0]
            )
        importance = rng.choices([1, 2, 3, 4, 5], [2, 5, 3, 2, 1])[0]
        yield Text(content, list(tags), speaker, importance)


def queries(count: int, seed: int = SEED + 1) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        speaker = rng.choice(SPEAKERS)
        who = speaker.name if speaker.sender_id.startswith("z") else speaker.name.split()[0]
        out.append(_fill(rng.choice(QUERY_TEMPLATES), rng, who))
    return out
